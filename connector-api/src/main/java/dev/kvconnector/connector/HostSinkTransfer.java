package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;

/** The {@link SinkTransfer} of a {@link HostLayerSink}: each chunk's tensors are scattered from host staging. */
final class HostSinkTransfer implements SinkTransfer {
    private final HostLayerSink sink;
    private final ChunkGeometry geo;

    HostSinkTransfer(HostLayerSink sink, ChunkGeometry geo) {
        this.sink = sink;
        this.geo = geo;
    }

    @Override
    public void fromHost(int layer, MemorySegment staging, int chunks) {
        for (int c = 0; c < chunks; c++) {
            for (int t = 0; t < geo.tensors; t++) {
                sink.scatter(layer, t, staging, geo.layerOffsets[c] + geo.tensorPayloadOffset(c, t),
                        geo.chunks[c].startToken(), geo.chunks[c].endToken());
            }
        }
    }

    @Override
    public void close() {
    }
}
