package dev.kvconnector.connector.spi;

import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

/**
 * Builds connectors from {@code kv_transfer_config}, through the {@link KVConnectorProvider}s on the class path:
 * {@code StoreConnector} and {@code MultiConnector} in connector-api, {@code TransferEngineConnector} in
 * connector-mooncake.
 *
 * <pre>{@code
 * KVStoreConnector c = KVConnectors.open(KvTransferConfig.fromJson(json),
 *         new ConnectorContext(layout, "llama-3-8b", List.of(pagedCache)));
 * }</pre>
 */
public final class KVConnectors {
    private KVConnectors() {
    }

    /**
     * Builds the connector a top-level {@code kv_transfer_config} names.
     *
     * @throws KVException {@code INVALID_CONFIG} naming the field for no connector, an unknown name or a bad setting;
     *     the backend's errors (a bad URI, a store that does not open) with the field named in front
     */
    public static KVStoreConnector open(KvTransferConfig config, ConnectorContext context) {
        return open(ConnectorConfig.root(config), context);
    }

    /** Builds the connector {@code config} names, its errors naming fields by {@code config}'s path. */
    public static KVStoreConnector open(ConnectorConfig config, ConnectorContext context) {
        String name = config.name();
        Map<String, KVConnectorProvider> providers = providers();
        if (name == null) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, config.path() + ".kv_connector is not set")
                    .operation("configure connector").hint("name one of " + String.join(", ", providers.keySet()))
                    .build();
        }
        KVConnectorProvider p = providers.get(name);
        if (p == null) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, config.path() + ".kv_connector '" + name
                            + "' is no connector on this class path").operation("configure connector")
                    .hint("connectors on this class path: " + String.join(", ", providers.keySet())
                            + "; TransferEngineConnector needs the connector-mooncake jar").build();
        }
        return p.create(config, context);
    }

    /** Every connector name on the class path, mapped to its provider. */
    public static Map<String, KVConnectorProvider> providers() {
        Map<String, KVConnectorProvider> byName = new TreeMap<>();
        for (KVConnectorProvider p : ServiceLoader.load(KVConnectorProvider.class, KVConnectors.class.getClassLoader())) {
            for (String n : p.names()) {
                byName.putIfAbsent(n, p);
            }
        }
        return byName;
    }
}
