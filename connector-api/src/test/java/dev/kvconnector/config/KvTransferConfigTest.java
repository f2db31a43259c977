package dev.kvconnector.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KvTransferConfig.LoadFailurePolicy;
import dev.kvconnector.config.KvTransferConfig.Role;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class KvTransferConfigTest {
    private static KVException invalid(String json) {
        KVException e = assertThrows(KVException.class, () -> KvTransferConfig.fromJson(json));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        return e;
    }

    private static void assertMentions(KVException e, String... parts) {
        String text = e.getMessage();
        for (String p : parts) {
            assertTrue(text.contains(p), "'" + p + "' in: " + text);
        }
    }

    @Test
    void emptyObjectGivesVllmDefaults() {
        KvTransferConfig c = KvTransferConfig.fromJson("{}");
        assertNull(c.kvConnector());
        assertNull(c.kvRole());
        assertNull(c.kvRank());
        assertEquals(1, c.kvParallelSize());
        assertEquals(1e9, c.kvBufferSize());
        assertEquals(1_000_000_000L, c.kvBufferSizeBytes());
        assertEquals("cuda", c.kvBufferDevice());
        assertEquals("127.0.0.1", c.kvIp());
        assertEquals(14579, c.kvPort());
        assertEquals(Map.of(), c.kvConnectorExtraConfig());
        assertEquals(LoadFailurePolicy.RECOMPUTE, c.kvLoadFailurePolicy());
        assertFalse(c.isKvTransferInstance());
        assertFalse(c.isProducer());
        assertFalse(c.isConsumer());
    }

    @Test
    void mooncakeStoreProducerConfigParses() {
        KvTransferConfig c = KvTransferConfig.fromJson("""
                {"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer"}""");
        assertEquals("MooncakeStoreConnector", c.kvConnector());
        assertEquals(Role.KV_PRODUCER, c.kvRole());
        assertTrue(c.isKvTransferInstance());
        assertTrue(c.isProducer());
        assertFalse(c.isConsumer());
    }

    @Test
    void rolesMapToProducerAndConsumerLikeVllm() {
        KvTransferConfig consumer = KvTransferConfig.fromJson("{\"kv_connector\":\"X\",\"kv_role\":\"kv_consumer\"}");
        assertFalse(consumer.isProducer());
        assertTrue(consumer.isConsumer());
        KvTransferConfig both = KvTransferConfig.fromJson("{\"kv_connector\":\"X\",\"kv_role\":\"kv_both\"}");
        assertTrue(both.isProducer() && both.isConsumer());
        KvTransferConfig roleOnly = KvTransferConfig.fromJson("{\"kv_role\":\"kv_both\"}");
        assertFalse(roleOnly.isProducer(), "no connector, no transfer");
    }

    @Test
    void everyFieldParsesAndRoundTrips() {
        String json = """
                {"kv_connector":"PyNcclConnector","engine_id":"e-1","kv_buffer_device":"cpu","kv_buffer_size":2.5e9,
                 "kv_role":"kv_consumer","kv_rank":1,"kv_parallel_size":2,"kv_ip":"10.0.0.5","kv_port":21001,
                 "kv_connector_extra_config":{"store_uri":"valkey://h:6379","nested":{"a":[1,2.5,"x",null,true]},
                 "big":123456789012345678901234567890},
                 "kv_connector_module_path":"my.module","kv_load_failure_policy":"fail"}""";
        KvTransferConfig c = KvTransferConfig.fromJson(json);
        assertEquals("e-1", c.engineId());
        assertEquals("cpu", c.kvBufferDevice());
        assertEquals(2.5e9, c.kvBufferSize());
        assertEquals(1, c.kvRank());
        assertEquals(2, c.kvParallelSize());
        assertEquals("10.0.0.5", c.kvIp());
        assertEquals(21001, c.kvPort());
        assertEquals(LoadFailurePolicy.FAIL, c.kvLoadFailurePolicy());
        assertEquals("my.module", c.kvConnectorModulePath());
        assertEquals("valkey://h:6379", c.extraConfig("store_uri", null));
        assertEquals("fallback", c.extraConfig("absent", "fallback"));
        @SuppressWarnings("unchecked")
        Map<String, Object> nested = (Map<String, Object>) c.kvConnectorExtraConfig().get("nested");
        assertEquals(java.util.Arrays.asList(1L, 2.5, "x", null, true), nested.get("a"));
        assertEquals(new java.math.BigInteger("123456789012345678901234567890"), c.kvConnectorExtraConfig().get("big"));
        assertEquals(c, KvTransferConfig.fromJson(c.toJson()));
    }

    @Test
    void extraConfigIsDeeplyUnmodifiable() {
        KvTransferConfig c = KvTransferConfig.fromJson("{\"kv_connector_extra_config\":{\"m\":{\"l\":[1]}}}");
        assertThrows(UnsupportedOperationException.class, () -> c.kvConnectorExtraConfig().put("x", 1));
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) c.kvConnectorExtraConfig().get("m");
        assertThrows(UnsupportedOperationException.class, () -> m.put("y", 2));
        @SuppressWarnings("unchecked")
        List<Object> l = (List<Object>) m.get("l");
        assertThrows(UnsupportedOperationException.class, () -> l.add(3));
    }

    @Test
    void builderMapIsCopiedNotShared() {
        Map<String, Object> extra = new java.util.HashMap<>(Map.of("k", "v"));
        KvTransferConfig c = KvTransferConfig.builder().kvConnectorExtraConfig(extra).build();
        extra.put("k", "changed");
        assertEquals("v", c.extraConfig("k", null));
    }

    @Test
    void numericStringsAreAcceptedLikeVllmsPydanticConfig() {
        KvTransferConfig c = KvTransferConfig.fromJson("""
                {"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1","kv_port":"21001",
                 "kv_rank":"0","kv_parallel_size":2.0}""");
        assertEquals(10.0, c.kvBufferSize());
        assertEquals(21001, c.kvPort());
        assertEquals(0, c.kvRank());
        assertEquals(2, c.kvParallelSize());
    }

    @Test
    void connectorWithoutRoleIsAnError() {
        KVException e = invalid("{\"kv_connector\":\"MooncakeStoreConnector\"}");
        assertMentions(e, "MooncakeStoreConnector", "kv_role");
        assertTrue(e.hint().contains("kv_producer"), e.hint());
    }

    @Test
    void unknownRoleIsAnErrorListingTheRoles() {
        KVException e = invalid("{\"kv_connector\":\"X\",\"kv_role\":\"kv_prefill\"}");
        assertMentions(e, "kv_prefill");
        assertTrue(e.hint().contains("kv_producer, kv_consumer, kv_both"), e.hint());
    }

    @Test
    void unknownPolicyIsAnError() {
        assertMentions(invalid("{\"kv_load_failure_policy\":\"retry\"}"), "kv_load_failure_policy", "retry");
    }

    @Test
    void unknownFieldIsAnErrorNamingItAndTheClosestKnownField() {
        KVException e = invalid("{\"kv_connector\":\"X\",\"kv_rolee\":\"kv_both\"}");
        assertMentions(e, "'kv_rolee'", "did you mean 'kv_role'");
        assertTrue(e.hint().contains("kv_load_failure_policy"), e.hint());
        assertMentions(invalid("{\"completely_else\":1}"), "'completely_else'");
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"kv_port\":\"abc\"}|kv_port|integer",
        "{\"kv_port\":true}|kv_port|integer",
        "{\"kv_port\":14579.5}|kv_port|integer",
        "{\"kv_port\":[1]}|kv_port|integer",
        "{\"kv_rank\":{}}|kv_rank|integer",
        "{\"kv_parallel_size\":0}|kv_parallel_size|integer",
        "{\"kv_buffer_size\":\"lots\"}|kv_buffer_size|number",
        "{\"kv_buffer_size\":false}|kv_buffer_size|number",
        "{\"kv_ip\":127}|kv_ip|string",
        "{\"kv_connector\":5}|kv_connector|string",
        "{\"kv_role\":[\"kv_both\"]}|kv_role|string",
        "{\"kv_connector_extra_config\":[]}|kv_connector_extra_config|JSON object",
        "{\"kv_connector_extra_config\":\"{}\"}|kv_connector_extra_config|JSON object",
        "{\"kv_port\":null}|kv_port|value",
        "{\"kv_ip\":null}|kv_ip|value"
    })
    void wrongTypesNameTheFieldAndTheExpectedType(String row) {
        String[] parts = row.split("\\|");
        assertMentions(invalid(parts[0]), "'" + parts[1] + "'", parts[2]);
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"kv_port\":1e30}|kv_port",
        "{\"kv_port\":99999999999999999999999999}|kv_port",
        "{\"kv_port\":70000}|kv_port",
        "{\"kv_port\":0}|kv_port",
        "{\"kv_port\":\"-1\"}|kv_port",
        "{\"kv_rank\":-1}|kv_rank",
        "{\"kv_rank\":2147483648}|kv_rank",
        "{\"kv_rank\":1e999999999}|kv_rank",
        "{\"kv_parallel_size\":-5}|kv_parallel_size",
        "{\"kv_buffer_size\":1e400}|kv_buffer_size",
        "{\"kv_buffer_size\":\"1e400\"}|kv_buffer_size",
        "{\"kv_buffer_size\":1e19}|kv_buffer_size",
        "{\"kv_buffer_size\":-1}|kv_buffer_size",
        "{\"kv_buffer_size\":0}|kv_buffer_size"
    })
    void hugeOrOutOfRangeNumbersAreErrorsNamingTheField(String row) {
        String[] parts = row.split("\\|");
        assertMentions(invalid(parts[0]), "'" + parts[1] + "'");
    }

    @Test
    void numberWithThousandsOfDigitsIsRejectedWithoutHanging() {
        KVException e = invalid("{\"kv_port\":" + "9".repeat(5000) + "}");
        assertMentions(e, "kv_transfer_config");
    }

    @Test
    void numericStringOfMegabytesIsRejectedQuickly() {
        assertMentions(invalid("{\"kv_buffer_size\":\"" + "1".repeat(200_000) + "x\"}"), "'kv_buffer_size'");
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "   ", "not json", "{\"kv_role\":", "[]", "\"kv_both\"", "null", "42",
        "{\"kv_role\":\"kv_both\"} trailing", "{\"kv_port\":1,\"kv_port\":2}", "{'kv_role':'kv_both'}"})
    void notOneJsonObjectIsAnError(String json) {
        KVException e = invalid(json);
        assertMentions(e, "kv_transfer_config");
    }

    @Test
    void nullTextIsAnError() {
        assertEquals(ErrorCode.INVALID_CONFIG,
                assertThrows(KVException.class, () -> KvTransferConfig.fromJson(null)).code());
    }

    @Test
    void toJsonLeavesOutNullFieldsAndWritesDefaults() {
        String json = KvTransferConfig.builder().kvConnector("LMCacheConnectorV1").kvRole(Role.KV_BOTH).build().toJson();
        assertFalse(json.contains("kv_rank"), json);
        assertFalse(json.contains("null"), json);
        assertTrue(json.contains("\"kv_role\":\"kv_both\""), json);
        assertTrue(json.contains("\"kv_port\":14579"), json);
        assertTrue(json.contains("\"kv_load_failure_policy\":\"recompute\""), json);
    }

    @Test
    void toStringShowsExtraConfigKeysButNotValues() {
        KvTransferConfig c = KvTransferConfig.fromJson("{\"kv_connector_extra_config\":{\"password\":\"hunter2\"}}");
        assertTrue(c.toString().contains("password"), c.toString());
        assertFalse(c.toString().contains("hunter2"), c.toString());
    }

    @Test
    void builderValidatesToo() {
        assertThrows(KVException.class, () -> KvTransferConfig.builder().kvPort(0).build());
        assertThrows(KVException.class, () -> KvTransferConfig.builder().kvConnector("X").build());
        assertThrows(KVException.class, () -> KvTransferConfig.builder().kvBufferSize(Double.NaN).build());
        assertThrows(KVException.class, () -> KvTransferConfig.builder().kvIp(" ").build());
        assertThrows(KVException.class,
                () -> KvTransferConfig.builder().kvConnectorExtraConfig(Map.of("t", new Object())).build());
    }
}
