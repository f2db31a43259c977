package dev.kvconnector.connector;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;

/**
 * Where an insert's layers come from: contiguous host tensors ({@link #contiguous}), a host paged cache through the
 * request's block table or slot mapping ({@link #paged}), or memory the CPU cannot read, such as a device paged
 * cache ({@code dev.kvconnector.cuda.DeviceLayers}), which stages its layers itself through an {@link InsertChannel}.
 * Host sources implement {@link HostLayerSource}, and the connector copies from them. Used by one thread at a time.
 */
public interface LayerSource {
    /**
     * Checks, once per call, that this source can supply a request of {@code tokens} tokens in {@code layout}.
     *
     * @param op the operation, for the error ({@code putLayer})
     * @param endpoint where the connector moves KV (a store URI, masked), for the error
     * @throws dev.kvconnector.error.KVException {@code SHAPE_MISMATCH} or {@code DTYPE_MISMATCH} naming the field
     */
    void check(KVLayout layout, int tokens, String op, String endpoint);

    /** Moves layers {@code first .. first + count - 1} into the insert behind {@code channel}. */
    void insert(InsertChannel channel, int first, int count);

    /**
     * One layer's tensors, each {@code [T, kvHeads, headSize]} in the layout's dtype: K and V (MHA) or the latent
     * (MLA), T the request's token count. The source serves layer {@code layer} only.
     */
    static HostLayerSource contiguous(int layer, Tensor... tensors) {
        return new ContiguousSource(layer, tensors);
    }

    /** A host paged cache, read through the request's slots (a block table or a slot mapping). */
    static PagedLayers paged(PagedKVCache cache, TokenSlots slots) {
        return new PagedLayers(cache, slots);
    }
}
