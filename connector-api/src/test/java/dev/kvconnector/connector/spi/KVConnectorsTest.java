package dev.kvconnector.connector.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.connector.multi.MultiConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Connectors, and compositions of them, chosen by a vLLM-style kv_transfer_config with no code. */
class KVConnectorsTest {
    private static final KVLayout LAYOUT = new KVLayout("test-mha", AttentionKind.MHA, 2, 2, 16, DType.BF16, 16, 32);
    private static final ConnectorContext CONTEXT = ConnectorContext.of(LAYOUT, "m");
    private static final String NESTED = "kv_transfer_config.kv_connector_extra_config.connectors[1]"
            + ".kv_connector_extra_config.";

    private static KVStoreConnector open(String json) {
        return KVConnectors.open(KvTransferConfig.fromJson(json), CONTEXT);
    }

    /** A composite of a namespaced store and a vllm-v1 store, with {@code second} as the second's extra config. */
    private static String multi(String second) {
        return """
                {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
                  {"kv_connector": "StoreConnector", "kv_role": "kv_both",
                   "kv_connector_extra_config": {"store_uri": "memory:?capacity=16MiB", "staging_bytes": 4194304}},
                  {"kv_connector": "StoreConnector", "kv_role": "kv_both", "kv_connector_extra_config": %s}]}}
                """.formatted(second);
    }

    private static KVException invalid(String json) {
        return assertThrows(KVException.class, () -> open(json).close());
    }

    @Test
    void aMultiConnectorOfTwoStoresIsBuiltFromJsonAndAnInsertReachesBoth() {
        RequestTokens request = RequestTokens.of(IntStream.range(7, 7 + 64).toArray()).inNamespace("t-1");
        try (KVStoreConnector c = open(multi("{\"store_uri\": \"memory:?capacity=16MiB\", \"key_scheme\": "
                + "\"vllm-v1\", \"staging_bytes\": 4194304}"));
             PagedKVCache cache = PagedKVCache.allocate(LAYOUT, 8)) {
            MultiConnector m = assertInstanceOf(MultiConnector.class, c);
            assertEquals(2, m.connectors().size());
            assertTrue(m.connectors().get(0).bindsNamespace(), "kvc-v1 by default");
            assertTrue(!m.connectors().get(1).bindsNamespace(), "key_scheme vllm-v1 was not applied");
            try (InsertSession s = m.beginInsert(request)) {
                s.putLayers(LayerSource.paged(cache, new BlockTable(IntStream.range(0, 4).toArray(), 16, 64)));
                s.commit();
            }
            assertEquals(64, m.connectors().get(0).lookup(request));
            assertEquals(64, m.connectors().get(1).lookup(request.inNamespace(null)));
        }
    }

    @Test
    void aSingleStoreConnectorTakesItsSettingsFromTheExtraConfig() {
        try (KVStoreConnector c = open("""
                {"kv_connector": "StoreConnector", "kv_role": "kv_consumer", "kv_connector_extra_config":
                  {"store_uri": "memory:", "key_scheme": "vllm-v1", "drop_mode": "consume", "layer_timeout_ms": 5}}
                """)) {
            StoreConnector s = assertInstanceOf(StoreConnector.class, c);
            assertEquals(16, s.keyContext().chunkTokens(), "vllm-v1's chunk is one block");
        }
    }

    @Test
    void anUnknownConnectorNameIsAnErrorListingTheKnownOnes() {
        KVException e = invalid("{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}");
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("kv_transfer_config.kv_connector 'NixlConnector'"), e.getMessage());
        assertTrue(e.getMessage().contains("MultiConnector") && e.getMessage().contains("StoreConnector"),
                e.getMessage());
    }

    @Test
    void aComposedConnectorWithoutANameIsAnErrorNamingItsPlace() {
        KVException e = invalid("""
                {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
                  {"kv_role": "kv_both"}]}}
                """);
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("kv_transfer_config.kv_connector_extra_config.connectors[0].kv_connector "
                + "is not set"), e.getMessage());
    }

    @Test
    void aMissingStoreUriIsAnErrorNamingTheWholeFieldAndTheFirstConnectorIsClosed() {
        // LeakCheck fails this test if the first connector's store stayed open.
        KVException e = invalid(multi("{\"key_scheme\": \"vllm-v1\"}"));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains(NESTED + "store_uri is missing"), e.getMessage());
    }

    @Test
    void aBadStoreUriIsAnErrorNamingTheField() {
        KVException scheme = invalid(multi("{\"store_uri\": \"nosuch://h:1\"}"));
        assertEquals(ErrorCode.UNKNOWN_STORE, scheme.code());
        assertTrue(scheme.getMessage().contains(NESTED + "store_uri: "), scheme.getMessage());

        KVException option = invalid(multi("{\"store_uri\": \"memory:?capacity=lots\"}"));
        assertEquals(ErrorCode.INVALID_URI, option.code());
        assertTrue(option.getMessage().contains(NESTED + "store_uri: ") && option.getMessage().contains("capacity"),
                option.getMessage());

        KVException syntax = invalid(multi("{\"store_uri\": \"::\"}"));
        assertEquals(ErrorCode.INVALID_URI, syntax.code());
        assertTrue(syntax.getMessage().contains(NESTED + "store_uri: "), syntax.getMessage());
    }

    @Test
    void aMisspeltSettingAValueOfTheWrongTypeAndAnUnknownSchemeAreErrorsNamingTheField() {
        KVException misspelt = invalid(multi("{\"store_url\": \"memory:\"}"));
        assertTrue(misspelt.getMessage().contains(NESTED + "store_url is not a setting of StoreConnector")
                && misspelt.getMessage().contains("store_uri"), misspelt.getMessage());

        KVException type = invalid(multi("{\"store_uri\": \"memory:\", \"staging_bytes\": \"big\"}"));
        assertEquals(ErrorCode.INVALID_CONFIG, type.code());
        assertTrue(type.getMessage().contains(NESTED + "staging_bytes must be an integer >= 1, got a string"),
                type.getMessage());

        KVException mode = invalid(multi("{\"store_uri\": \"memory:\", \"drop_mode\": \"keep\"}"));
        assertTrue(mode.getMessage().contains(NESTED + "drop_mode must be one of consume, retain"), mode.getMessage());

        KVException scheme = invalid(multi("{\"store_uri\": \"memory:\", \"key_scheme\": \"vllm-v9\"}"));
        assertTrue(scheme.getMessage().contains(NESTED + "key_scheme: "), scheme.getMessage());
    }

    @Test
    void aCompositeWithoutConnectorsOrWithAnUnknownSettingIsRefused() {
        KVException none = invalid("{\"kv_connector\": \"MultiConnector\", \"kv_role\": \"kv_both\", "
                + "\"kv_connector_extra_config\": {\"connectors\": []}}");
        assertTrue(none.getMessage().contains("kv_transfer_config.kv_connector_extra_config.connectors must be a "
                + "non-empty list"), none.getMessage());
        KVException extra = invalid("{\"kv_connector\": \"MultiConnector\", \"kv_role\": \"kv_both\", "
                + "\"kv_connector_extra_config\": {\"connector\": []}}");
        assertTrue(extra.getMessage().contains("kv_transfer_config.kv_connector_extra_config.connector is not a "
                + "setting of MultiConnector"), extra.getMessage());
    }
}
