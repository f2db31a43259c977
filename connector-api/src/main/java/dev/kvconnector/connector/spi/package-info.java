/**
 * Connectors chosen by configuration: {@link dev.kvconnector.connector.spi.KVConnectors} builds the connector a
 * vLLM-style {@code kv_transfer_config} names, through the {@link dev.kvconnector.connector.spi.KVConnectorProvider}s
 * on the class path, with what the engine supplies in a {@link dev.kvconnector.connector.spi.ConnectorContext}.
 */
package dev.kvconnector.connector.spi;
