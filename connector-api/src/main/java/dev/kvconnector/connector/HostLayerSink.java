package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/** A {@link LayerSink} in host memory: the connector copies each validated chunk straight into it. */
public interface HostLayerSink extends LayerSink {
    /**
     * Copies tokens {@code [from, to)} of tensor {@code tensor} of layer {@code layer}, {@code [to - from, kvHeads,
     * headSize]} contiguous in {@code src} from byte offset {@code srcOffset}, into the sink.
     */
    void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to);

    /**
     * {@link #scatter} that also adds the copied bytes to {@code sum}, in their order in {@code src}, in one
     * pass. The sink holds the bytes before the caller compares the checksum: on a mismatch they count as not loaded.
     */
    void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to, WordSum sum);

    @Override
    default SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op) {
        return new HostSinkTransfer(this, geometry);
    }

    /** {@inheritDoc} Re-points a host transfer of this sink, which holds nothing once closed. */
    @Override
    default SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op, SinkTransfer previous) {
        return previous instanceof HostSinkTransfer h && h.sink() == this ? h.retarget(geometry)
                : open(resources, geometry, op);
    }
}
