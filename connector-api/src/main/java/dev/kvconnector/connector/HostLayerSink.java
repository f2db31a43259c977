package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

/** A {@link LayerSink} in host memory: the connector copies each validated chunk straight into it. */
public interface HostLayerSink extends LayerSink {
    /**
     * Copies tokens {@code [from, to)} of tensor {@code tensor} of layer {@code layer}, {@code [to - from, kvHeads,
     * headSize]} contiguous in {@code src} from byte offset {@code srcOffset}, into the sink.
     */
    void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to);

    /**
     * {@link #scatter} that also updates {@code crc} over the copied bytes in their order in {@code src}, in one
     * pass. The sink holds the bytes before the caller compares the CRC: on a mismatch they count as not loaded.
     */
    void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to, CRC32C crc);

    @Override
    default SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op) {
        return new HostSinkTransfer(this, geometry);
    }
}
