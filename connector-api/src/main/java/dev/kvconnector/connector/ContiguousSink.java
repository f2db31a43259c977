package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.memory.ChecksummedCopy;
import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/** Contiguous host tensors {@code perLayer[layer][tensor]} that a drop-select fills: {@link LayerSink#contiguous}. */
final class ContiguousSink implements HostLayerSink {
    private final Tensor[][] perLayer;
    private long tokenBytes;

    ContiguousSink(Tensor[][] perLayer) {
        this.perLayer = new Tensor[perLayer.length][];
        for (int i = 0; i < perLayer.length; i++) {
            this.perLayer[i] = perLayer[i].clone();
            for (Tensor t : this.perLayer[i]) {
                t.requireHostAccessible("dropSelect");
            }
        }
    }

    @Override
    public void check(KVLayout layout, int tokens, String op, String endpoint) {
        if (perLayer.length != layout.numLayers()) {
            throw LayerChecks.error(ErrorCode.SHAPE_MISMATCH, perLayer.length + " layers given, layout has "
                    + layout.numLayers(), op, endpoint);
        }
        long need = layout.bytesPerTokenPerTensor() * tokens;
        for (int l = 0; l < perLayer.length; l++) {
            if (perLayer[l].length != layout.tensorsPerLayer()) {
                throw LayerChecks.error(ErrorCode.SHAPE_MISMATCH, "layer " + l + " has " + perLayer[l].length
                        + " tensors, layout needs " + layout.tensorsPerLayer(), op, endpoint);
            }
            for (Tensor t : perLayer[l]) {
                if (t.spec().dtype() != layout.dtype() || t.spec().byteSize() < need) {
                    throw LayerChecks.error(ErrorCode.SHAPE_MISMATCH, "layer " + l + " target " + t.spec()
                            + " cannot hold " + tokens + " tokens of " + layout.dtype() + " x " + layout.kvHeads()
                            + " x " + layout.headSize(), op, endpoint);
                }
            }
        }
        tokenBytes = layout.bytesPerTokenPerTensor();
    }

    @Override
    public void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to) {
        MemorySegment.copy(src, srcOffset, perLayer[layer][tensor].segment(), from * tokenBytes,
                (to - from) * tokenBytes);
    }

    @Override
    public void scatter(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to, WordSum sum) {
        ChecksummedCopy.copy(src, srcOffset, perLayer[layer][tensor].segment(), from * tokenBytes,
                (to - from) * tokenBytes, sum);
    }
}
