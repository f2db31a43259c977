package dev.kvconnector.connector;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;

/**
 * Where a drop-select's layers go: contiguous host tensors ({@link #contiguous}), a host paged cache through the
 * request's slots ({@link #paged}), or memory the CPU cannot write, such as a device paged cache
 * ({@code dev.kvconnector.cuda.DeviceLayers}), which opens a {@link SinkTransfer} of its own. Host sinks implement
 * {@link HostLayerSink}.
 */
public interface LayerSink {
    /**
     * Checks, once per drop-select, that this sink can hold a request of {@code tokens} tokens in {@code layout}.
     *
     * @throws dev.kvconnector.error.KVException {@code SHAPE_MISMATCH} naming the field
     */
    void check(KVLayout layout, int tokens, String op, String endpoint);

    /** Opens this sink for one drop-select of the request that {@code geometry} describes; closed when it ends. */
    SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op);

    /**
     * {@link #open(ConnectorResources, ChunkGeometry, String)} for a drop-select that follows one through
     * {@code previous}, a transfer this sink opened that has been closed: the sink may re-point {@code previous} at
     * {@code geometry} and return it instead of a new one. By default a new one.
     */
    default SinkTransfer open(ConnectorResources resources, ChunkGeometry geometry, String op, SinkTransfer previous) {
        return open(resources, geometry, op);
    }

    /** Contiguous tensors {@code perLayer[layer][tensor]}, each {@code [T, kvHeads, headSize]} or larger. */
    static HostLayerSink contiguous(Tensor[][] perLayer) {
        return new ContiguousSink(perLayer);
    }

    /** A host paged cache, written through the request's slots. */
    static PagedLayers paged(PagedKVCache cache, TokenSlots slots) {
        return new PagedLayers(cache, slots);
    }
}
