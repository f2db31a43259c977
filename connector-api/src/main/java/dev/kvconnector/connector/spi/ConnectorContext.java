package dev.kvconnector.connector.spi;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import java.util.List;
import java.util.Objects;

/**
 * What an engine gives every connector it builds from configuration, which a {@code kv_transfer_config} cannot hold:
 * the layout of its KV cache, the served model and its paged caches.
 *
 * @param layout the layout of every transfer
 * @param modelId the served model's id, bound into store keys
 * @param caches the engine's host paged caches, which a peer-to-peer connector registers so that a peer may write
 *     into them (store connectors ignore them); the engine keeps them open while the connector is
 */
public record ConnectorContext(KVLayout layout, String modelId, List<PagedKVCache> caches) {
    /** Checks that a layout and a model id are given; copies the list. */
    public ConnectorContext {
        Objects.requireNonNull(layout, "layout");
        Objects.requireNonNull(modelId, "modelId");
        caches = List.copyOf(caches);
    }

    /** A context with no paged caches. */
    public static ConnectorContext of(KVLayout layout, String modelId) {
        return new ConnectorContext(layout, modelId, List.of());
    }
}
