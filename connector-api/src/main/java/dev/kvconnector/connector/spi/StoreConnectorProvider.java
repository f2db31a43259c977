package dev.kvconnector.connector.spi;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.store.StoreUri;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Builds a {@link StoreConnector} for {@code "kv_connector": "StoreConnector"}, over the store its
 * {@code kv_connector_extra_config} names (opened with the connector and closed with it):
 *
 * <table>
 *   <caption>kv_connector_extra_config of StoreConnector</caption>
 *   <tr><th>key</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code store_uri}</td><td>the store, as {@code KVStores.open} reads it</td><td>required</td></tr>
 *   <tr><td>{@code key_scheme}</td><td>the key scheme, with the codec it implies</td><td>{@code kvc-v1}</td></tr>
 *   <tr><td>{@code drop_mode}</td><td>{@code consume} or {@code retain} after a drop-select</td>
 *       <td>{@code consume} for a scheme that binds a namespace, else {@code retain} (prefixes are shared)</td></tr>
 *   <tr><td>{@code chunk_tokens}</td><td>tokens per chunk</td><td>the connector's</td></tr>
 *   <tr><td>{@code layer_timeout_ms}</td><td>a layer-wise drop-select's wait, ms</td><td>the connector's</td></tr>
 *   <tr><td>{@code staging_bytes}</td><td>the staging pool, bytes</td><td>the connector's</td></tr>
 *   <tr><td>{@code ttl_ms}</td><td>time to live of stored objects, ms; 0 leaves it to the store</td>
 *       <td>the connector's</td></tr>
 * </table>
 */
public final class StoreConnectorProvider implements KVConnectorProvider {
    /** The {@code kv_connector} name. */
    public static final String NAME = "StoreConnector";
    /** {@code kv_connector_extra_config} key of the store URI. */
    public static final String STORE_URI = "store_uri";
    /** {@code kv_connector_extra_config} key of the key scheme. */
    public static final String KEY_SCHEME = "key_scheme";
    private static final Set<String> KEYS = Set.of(STORE_URI, KEY_SCHEME, "drop_mode", "chunk_tokens",
            "layer_timeout_ms", "staging_bytes", "ttl_ms");

    @Override
    public Set<String> names() {
        return Set.of(NAME);
    }

    @Override
    public KVStoreConnector create(ConnectorConfig config, ConnectorContext context) {
        config.rejectUnknown(KEYS);
        String uri = config.requireString(STORE_URI, "the URI of its store, such as shm:/kv?capacity=1GiB");
        try {
            StoreUri.parse(uri);
        } catch (KVException e) {
            throw config.wrap(STORE_URI, e);
        }
        String scheme = config.string(KEY_SCHEME, KeySchemes.DEFAULT);
        boolean namespaced;
        try {
            namespaced = KeySchemes.byName(scheme).bindsNamespace();
        } catch (KVException e) {
            throw config.wrap(KEY_SCHEME, e);
        }
        StoreConnector.Builder b = KVStoreConnector.builder(uri, context.layout()).modelId(context.modelId())
                .keyScheme(scheme).dropMode(DropMode.valueOf(config.choice("drop_mode", namespaced ? "consume"
                        : "retain", List.of("consume", "retain")).toUpperCase(Locale.ROOT)));
        if (config.config().kvConnectorExtraConfig().containsKey("chunk_tokens")) {
            b.chunkTokens(config.intValue("chunk_tokens", 0, 1));
        }
        long timeout = config.longValue("layer_timeout_ms", -1, 0);
        if (timeout >= 0) {
            b.layerTimeoutMillis(timeout);
        }
        long staging = config.longValue("staging_bytes", -1, 1);
        if (staging > 0) {
            b.stagingBytes(staging);
        }
        long ttl = config.longValue("ttl_ms", -1, 0);
        if (ttl >= 0) {
            b.ttlMillis(ttl);
        }
        try {
            return b.build();
        } catch (KVException e) {
            throw switch (e.code()) {
                case INVALID_URI, UNKNOWN_STORE, STORE_UNREACHABLE, AUTH_FAILED -> config.wrap(STORE_URI, e);
                default -> config.wrap(e);
            };
        }
    }
}
