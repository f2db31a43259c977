package dev.kvconnector.connector;

import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;
import java.lang.foreign.MemorySegment;

/**
 * Where a drop-select writes: a paged KV cache through the request's slots (in host memory, or in GPU memory:
 * {@link #device}), or contiguous per-layer tensors; plus, optionally, a host tensor for the hidden states
 * {@code [T, hiddenSize]}.
 */
public final class DropTarget {
    private final PagedKVCache cache;
    private final DevicePagedKVCache deviceCache;
    private final TokenSlots slots;
    private final Tensor[][] contiguous;
    private final Tensor hidden;

    private DropTarget(PagedKVCache cache, DevicePagedKVCache deviceCache, TokenSlots slots, Tensor[][] contiguous,
                       Tensor hidden) {
        this.cache = cache;
        this.deviceCache = deviceCache;
        this.slots = slots;
        this.contiguous = contiguous;
        this.hidden = hidden;
    }

    /** Scatter into {@code cache} at the request's {@code slots}. */
    public static DropTarget paged(PagedKVCache cache, TokenSlots slots) {
        return new DropTarget(cache, null, slots, null, null);
    }

    /**
     * Scatter into a paged cache in GPU memory at the request's {@code slots}: each layer is read into pooled pinned
     * host staging, copied to the device and scattered by the paged-KV kernel (or, with a {@code DEVICE_MEMORY}
     * store, read straight into a registered device buffer). A layer counts as loaded once the scatter has
     * completed on the device.
     */
    public static DropTarget device(DevicePagedKVCache cache, TokenSlots slots) {
        return new DropTarget(null, cache, slots, null, null);
    }

    /** Copy into contiguous tensors {@code perLayer[layer][tensor]}, each {@code [T, kvHeads, headSize]}. */
    public static DropTarget contiguous(Tensor[][] perLayer) {
        Tensor[][] copy = new Tensor[perLayer.length][];
        for (int i = 0; i < perLayer.length; i++) {
            copy[i] = perLayer[i].clone();
            for (Tensor t : copy[i]) {
                t.requireHostAccessible("dropSelect");
            }
        }
        return new DropTarget(null, null, null, copy, null);
    }

    /** This target plus a hidden-state tensor {@code [T, hiddenSize]}. */
    public DropTarget withHidden(Tensor hiddenStates) {
        hiddenStates.requireHostAccessible("dropSelect");
        return new DropTarget(cache, deviceCache, slots, contiguous, hiddenStates);
    }

    /** The hidden-state tensor, or null. */
    public Tensor hidden() {
        return hidden;
    }

    /** The device cache of a {@link #device} target, or null. */
    DevicePagedKVCache deviceCache() {
        return deviceCache;
    }

    /** The request's slots in a paged target, or null. */
    TokenSlots slots() {
        return slots;
    }

    void validate(KVLayout layout, int tokens) {
        if (cache != null || deviceCache != null) {
            KVLayout have = cache != null ? cache.layout() : deviceCache.layout();
            if (!have.canonicalString().equals(layout.canonicalString())) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "paged cache layout " + have.canonicalString()
                        + " differs from the connector's " + layout.canonicalString()).operation("dropSelect").build();
            }
            if (slots.tokens() < tokens) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "slots cover " + slots.tokens() + " tokens, the request has "
                        + tokens).operation("dropSelect").build();
            }
        } else {
            if (contiguous.length != layout.numLayers()) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, contiguous.length + " layers given, layout has "
                        + layout.numLayers()).operation("dropSelect").build();
            }
            long need = layout.bytesPerTokenPerTensor() * tokens;
            for (int l = 0; l < contiguous.length; l++) {
                if (contiguous[l].length != layout.tensorsPerLayer()) {
                    throw KVException.of(ErrorCode.SHAPE_MISMATCH, "layer " + l + " has " + contiguous[l].length
                            + " tensors, layout needs " + layout.tensorsPerLayer()).operation("dropSelect").build();
                }
                for (Tensor t : contiguous[l]) {
                    if (t.spec().dtype() != layout.dtype() || t.spec().byteSize() < need) {
                        throw KVException.of(ErrorCode.SHAPE_MISMATCH, "layer " + l + " target " + t.spec()
                                + " cannot hold " + tokens + " tokens of " + layout.dtype() + " x "
                                + layout.kvHeads() + " x " + layout.headSize()).operation("dropSelect").build();
                    }
                }
            }
        }
    }

    void write(int layer, int tensor, MemorySegment src, long srcOffset, int from, int to, long tokenBytes) {
        if (cache != null) {
            cache.scatter(src, srcOffset, layer, tensor, slots, from, to);
        } else {
            MemorySegment.copy(src, srcOffset, contiguous[layer][tensor].segment(), from * tokenBytes,
                    (to - from) * tokenBytes);
        }
    }
}
