package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.memory.ChecksummedCopy;
import java.lang.foreign.MemorySegment;
import dev.kvconnector.memory.WordSum;

/** One layer's contiguous host tensors, each {@code [T, kvHeads, headSize]}: {@link LayerSource#contiguous}. */
final class ContiguousSource implements HostLayerSource {
    private final int layer;
    private final Tensor[] tensors;

    ContiguousSource(int layer, Tensor[] tensors) {
        this.layer = layer;
        this.tensors = tensors.clone();
    }

    @Override
    public void check(KVLayout layout, int tokens, String op, String endpoint) {
        if (tensors.length != layout.tensorsPerLayer()) {
            throw LayerChecks.error(ErrorCode.SHAPE_MISMATCH, tensors.length + " tensors given for layer " + layer
                    + ", the " + layout.kind() + " layout needs " + layout.tensorsPerLayer(), op, endpoint);
        }
        for (Tensor t : tensors) {
            t.requireHostAccessible("putLayer");
            if (t.spec().dtype() != layout.dtype()) {
                throw LayerChecks.error(ErrorCode.DTYPE_MISMATCH, "layer " + layer + " tensor is " + t.spec().dtype()
                        + ", the layout stores " + layout.dtype(), op, endpoint);
            }
            TensorSpec s = t.spec();
            if (s.rank() != 3 || s.dim(0) != tokens || s.dim(1) != layout.kvHeads() || s.dim(2) != layout.headSize()) {
                throw LayerChecks.error(ErrorCode.SHAPE_MISMATCH, "layer " + layer + " tensor is " + s + ", expected "
                        + TensorSpec.of(layout.dtype(), tokens, layout.kvHeads(), layout.headSize()), op, endpoint);
            }
        }
    }

    @Override
    public void insert(InsertChannel channel, int first, int count) {
        if (first != layer || count != 1) {
            throw LayerChecks.error(ErrorCode.INVALID_ARGUMENT, "the tensors given are layer " + layer + "'s, not "
                    + "layers " + first + ".." + (first + count - 1), "putLayer", channel.resources().endpoint());
        }
        channel.putHost(layer, this);
    }

    @Override
    public void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset) {
        long tokenBytes = tokenBytes(tensor);
        MemorySegment.copy(tensors[tensor].segment(), from * tokenBytes, dst, dstOffset, (to - from) * tokenBytes);
    }

    @Override
    public void gather(int layer, int tensor, int from, int to, MemorySegment dst, long dstOffset, WordSum sum) {
        long tokenBytes = tokenBytes(tensor);
        ChecksummedCopy.copy(tensors[tensor].segment(), from * tokenBytes, dst, dstOffset, (to - from) * tokenBytes,
                sum);
    }

    private long tokenBytes(int tensor) {
        return tensors[tensor].spec().byteSize() / tensors[tensor].spec().dim(0);
    }
}
