package dev.kvconnector.connector;

import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;

/**
 * One request's insert, written layer by layer: begin, put every layer (and optionally the hidden states), then
 * commit or abort. Reads like a claim/commit/abort ring-buffer protocol:
 *
 * <pre>{@code
 * try (InsertSession insert = connector.beginInsert(RequestTokens.of(prompt))) {
 *     for (int layer = 0; layer < layers; layer++) {
 *         engine.computeLayer(layer);
 *         insert.putLayer(layer, cache, blockTable);   // copied now, stored asynchronously
 *     }
 *     insert.putHidden(hiddenStates);
 *     insert.commit();                                  // waits for the puts, then makes the entry visible
 * }                                                     // close() aborts an uncommitted insert
 * }</pre>
 *
 * <p>Each {@code putLayer} has read the layer's tokens before it returns, so the engine may overwrite its own
 * buffers right away. Nothing is visible to consumers until {@link #commit()}; abort removes whatever was
 * written. Not thread-safe: one thread drives one session.
 */
public interface InsertSession extends AutoCloseable {
    /** Prompt tokens this insert covers. */
    int tokens();

    /**
     * Puts layer {@code layer} from {@code source}.
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} for a layer outside the layout or put twice,
     *     {@code SHAPE_MISMATCH}/{@code DTYPE_MISMATCH} when the source does not fit, or an earlier put's failure
     */
    void putLayer(int layer, LayerSource source);

    /**
     * Puts every layer from {@code source}, for an engine that inserts after its whole forward pass (a device source
     * overlaps the copy of layer {@code i + 1} with the put of layer {@code i}).
     */
    void putLayers(LayerSource source);

    /**
     * Puts one layer from contiguous tensors: K and V (MHA) or the latent (MLA), each {@code [T, kvHeads, headSize]}
     * in the layout's dtype, where T is the request's token count.
     */
    default void putLayer(int layer, Tensor... layerTensors) {
        putLayer(layer, LayerSource.contiguous(layer, layerTensors));
    }

    /** Puts one layer gathered from a host paged cache through the request's slots (a block table or slot mapping). */
    default void putLayer(int layer, PagedKVCache cache, TokenSlots slots) {
        putLayer(layer, LayerSource.paged(cache, slots));
    }

    /** Puts the hidden states {@code [T, hiddenSize]} (any dtype); the consumer samples its first token from them. */
    void putHidden(Tensor hidden);

    /**
     * Waits for every put, then makes the entry visible. When any put failed, or a layer was never put, the insert
     * is aborted and the failure thrown.
     */
    void commit();

    /** Removes every object written so far. Idempotent; does nothing after a commit. */
    void abort();

    /** Aborts unless committed. */
    @Override
    void close();
}
