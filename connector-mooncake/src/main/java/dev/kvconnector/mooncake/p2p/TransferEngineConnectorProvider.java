package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.spi.ConnectorConfig;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectorProvider;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.te.TransferEngine;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/**
 * Builds a {@link TransferEngineConnector} for {@code "kv_connector": "TransferEngineConnector"}, over an engine
 * opened from its {@code engine_uri} and closed with it. A consumer ({@code kv_role} {@code kv_consumer} or
 * {@code kv_both}) registers the context's paged caches, which P writes into; a producer registers none. The
 * top-level {@code engine_id} is the id D publishes as {@code remote_engine_id} (by default the engine's segment).
 *
 * <table>
 *   <caption>kv_connector_extra_config of TransferEngineConnector</caption>
 *   <tr><th>key</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code engine_uri}</td><td>the local engine, {@code mooncake-te://HOST?protocol=tcp&library=...}</td>
 *       <td>required</td></tr>
 *   <tr><td>{@code layer_timeout_ms}</td><td>D's wait for P's next message, ms</td>
 *       <td>{@link P2pConfiguration#LAYER_TIMEOUT_MS_DEFAULT}</td></tr>
 *   <tr><td>{@code transfer_timeout_ms}</td><td>P's wait for its writes, ms</td>
 *       <td>{@link P2pConfiguration#TRANSFER_TIMEOUT_MS_DEFAULT}</td></tr>
 *   <tr><td>{@code staging_bytes}</td><td>registered staging, bytes</td>
 *       <td>{@link P2pConfiguration#STAGING_BYTES_DEFAULT}</td></tr>
 *   <tr><td>{@code max_blocks}</td><td>the most blocks one request may span</td>
 *       <td>{@link P2pConfiguration#MAX_BLOCKS_DEFAULT}</td></tr>
 *   <tr><td>{@code memory_location}</td><td>where registered memory lives, {@code cpu:N}</td>
 *       <td>{@link P2pConfiguration#LOCATION_DEFAULT}</td></tr>
 * </table>
 * (Each default is the {@link P2pConfiguration} property's value when it is set.)
 */
public final class TransferEngineConnectorProvider implements KVConnectorProvider {
    /** The {@code kv_connector} name. */
    public static final String NAME = "TransferEngineConnector";
    /** {@code kv_connector_extra_config} key of the engine URI. */
    public static final String ENGINE_URI = "engine_uri";
    private static final Set<String> KEYS = Set.of(ENGINE_URI, "layer_timeout_ms", "transfer_timeout_ms",
            "staging_bytes", "max_blocks", "memory_location");

    @Override
    public Set<String> names() {
        return Set.of(NAME);
    }

    @Override
    public KVStoreConnector create(ConnectorConfig config, ConnectorContext context) {
        config.rejectUnknown(KEYS);
        String uri = config.requireString(ENGINE_URI, "its local transfer engine, such as "
                + "mooncake-te://10.0.0.5?protocol=tcp");
        try {
            StoreUri parsed = StoreUri.parse(uri);
            if (!TransferEngine.SCHEME.equals(parsed.scheme())) {
                throw KVException.of(ErrorCode.INVALID_URI, "the scheme is " + parsed.scheme() + ":, not "
                        + TransferEngine.SCHEME + "://").store(parsed.masked()).build();
            }
        } catch (KVException e) {
            throw config.wrap(ENGINE_URI, e);
        }
        TransferEngineConnector.Builder b = TransferEngineConnector.builder(uri, context.layout())
                .modelId(context.modelId())
                .layerTimeoutMillis(config.longValue("layer_timeout_ms", P2pConfiguration.layerTimeoutMillis(), 1))
                .transferTimeoutMillis(config.longValue("transfer_timeout_ms",
                        P2pConfiguration.transferTimeoutMillis(), 1))
                .stagingBytes(config.longValue("staging_bytes", P2pConfiguration.stagingBytes(), 1))
                .maxBlocksPerRequest(config.intValue("max_blocks", P2pConfiguration.maxBlocks(), 1))
                .memoryLocation(config.string("memory_location", P2pConfiguration.location()));
        if (config.config().engineId() != null) {
            b.engineId(config.config().engineId());
        }
        if (config.config().isConsumer()) {
            for (PagedKVCache cache : context.caches()) {
                b.registerCache(cache);
            }
        }
        try {
            return b.build();
        } catch (KVException e) {
            throw switch (e.code()) {
                case INVALID_URI, NATIVE_LIBRARY_MISSING -> config.wrap(ENGINE_URI, e);
                default -> config.wrap(e);
            };
        }
    }
}
