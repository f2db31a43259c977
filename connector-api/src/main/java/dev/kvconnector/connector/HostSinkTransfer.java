package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/** The {@link SinkTransfer} of a {@link HostLayerSink}: each chunk's tensors are scattered from host staging. */
final class HostSinkTransfer implements SinkTransfer {
    private final HostLayerSink sink;
    private ChunkGeometry geo;

    HostSinkTransfer(HostLayerSink sink, ChunkGeometry geo) {
        this.sink = sink;
        this.geo = geo;
    }

    HostLayerSink sink() {
        return sink;
    }

    /** This transfer, closed, for another drop-select into the same sink, of the request {@code geometry} describes. */
    HostSinkTransfer retarget(ChunkGeometry geometry) {
        this.geo = geometry;
        return this;
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
    public boolean takesObjects() {
        return true;
    }

    @Override
    public void fromObject(int layer, int chunk, MemorySegment object, WordSum sum) {
        for (int t = 0; t < geo.tensors; t++) {
            sink.scatter(layer, t, object, geo.tensorPayloadOffset(chunk, t), geo.chunks[chunk].startToken(),
                    geo.chunks[chunk].endToken(), sum);
        }
    }

    @Override
    public void close() {
    }
}
