package dev.kvconnector.connector.multi;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.spi.ConnectorConfig;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectorProvider;
import dev.kvconnector.connector.spi.KVConnectors;
import java.util.Set;

/**
 * Builds a {@link MultiConnector} for {@code "kv_connector": "MultiConnector"}: each config under
 * {@code kv_connector_extra_config.connectors} is built by {@link KVConnectors#open} with the same context, in order.
 */
public final class MultiConnectorProvider implements KVConnectorProvider {
    @Override
    public Set<String> names() {
        return Set.of(MultiConnector.NAME);
    }

    @Override
    public KVStoreConnector create(ConnectorConfig config, ConnectorContext context) {
        return MultiConnector.fromConfig(config, c -> KVConnectors.open(c, context));
    }
}
