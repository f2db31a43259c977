package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;

/** A {@link LayerSink} in host memory: the connector copies each validated chunk straight into it. */
public interface HostLayerSink extends LayerSink {
    /**
     * Copies tokens {@code [from, to)} of tensor {@code tensor} of layer {@code layer}, {@code [to - from, kvHeads,
     * headSize]} contiguous in {@code src} from byte offset {@code srcOffset}, into the sink.
     */
    void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to);

    @Override
    default SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op) {
        return new HostSinkTransfer(this, geometry);
    }
}
