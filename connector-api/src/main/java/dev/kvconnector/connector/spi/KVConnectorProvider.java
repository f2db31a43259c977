package dev.kvconnector.connector.spi;

import dev.kvconnector.connector.KVStoreConnector;
import java.util.Set;

/**
 * Builds connectors for {@code kv_connector} names; found through {@link java.util.ServiceLoader}, so that a
 * {@code kv_transfer_config} chooses a connector (or a composition of them) with no code. Register an
 * implementation in {@code META-INF/services/dev.kvconnector.connector.spi.KVConnectorProvider}.
 */
public interface KVConnectorProvider {
    /** The {@code kv_connector} names built, such as {@code StoreConnector}. */
    Set<String> names();

    /**
     * Builds the connector {@code config} describes; every error names the field by its path
     * ({@link ConnectorConfig#invalid}, {@link ConnectorConfig#wrap}).
     */
    KVStoreConnector create(ConnectorConfig config, ConnectorContext context);
}
