package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;

/**
 * Where a drop-select writes: a {@link LayerSink} for the layers and, optionally, a host tensor for the hidden
 * states {@code [T, hiddenSize]}. Immutable.
 */
public final class DropTarget {
    private final LayerSink layers;
    private final Tensor hidden;

    private DropTarget(LayerSink layers, Tensor hidden) {
        this.layers = layers;
        this.hidden = hidden;
    }

    /** Layers into {@code sink} (for a device paged cache: {@code DeviceLayers.of(cache, slots)}). */
    public static DropTarget of(LayerSink sink) {
        if (sink == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a drop target needs a layer sink, got null")
                    .operation("dropSelect").build();
        }
        return new DropTarget(sink, null);
    }

    /** Scatter into a host {@code cache} at the request's {@code slots}. */
    public static DropTarget paged(PagedKVCache cache, TokenSlots slots) {
        return of(LayerSink.paged(cache, slots));
    }

    /** Copy into contiguous tensors {@code perLayer[layer][tensor]}, each {@code [T, kvHeads, headSize]}. */
    public static DropTarget contiguous(Tensor[][] perLayer) {
        return of(LayerSink.contiguous(perLayer));
    }

    /** This target plus a hidden-state tensor {@code [T, hiddenSize]}. */
    public DropTarget withHidden(Tensor hiddenStates) {
        hiddenStates.requireHostAccessible("dropSelect");
        return new DropTarget(layers, hiddenStates);
    }

    /** Where the layers go. */
    public LayerSink layers() {
        return layers;
    }

    /** The hidden-state tensor, or null when the target takes none. */
    public Tensor hidden() {
        return hidden;
    }
}
