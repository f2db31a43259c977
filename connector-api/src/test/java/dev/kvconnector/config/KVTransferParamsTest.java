package dev.kvconnector.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class KVTransferParamsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static KVException invalid(String json) {
        KVException e = assertThrows(KVException.class, () -> KVTransferParams.fromJson(json));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        return e;
    }

    @Test
    void kvconnectorFieldsRoundTrip() throws Exception {
        String json = """
                {"request_id":"cmpl-1","transfer_id":"t-42","store_uri":"valkey://h:6379","token_hashes":["a","b"],
                 "keys":["k1","k2"],"role":"kv_producer"}""";
        KVTransferParams p = KVTransferParams.fromJson(json);
        assertEquals("cmpl-1", p.requestId());
        assertEquals("t-42", p.transferId());
        assertEquals("valkey://h:6379", p.storeUri());
        assertEquals(List.of("a", "b"), p.tokenHashes());
        assertEquals(List.of("k1", "k2"), p.keys());
        assertEquals("kv_producer", p.role());
        assertEquals(JSON.readTree(json), JSON.readTree(p.toJson()));
        assertEquals(p, KVTransferParams.fromJson(p.toJson()));
    }

    @Test
    void vllmV1NixlAnswerRoundTrips() throws Exception {
        String json = """
                {"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"eng-0",
                 "remote_block_ids":[0,5,7],"remote_host":"10.0.0.5","remote_port":5600,
                 "remote_request_id":"cmpl-9","tp_size":2}""";
        KVTransferParams p = KVTransferParams.fromJson(json);
        assertEquals(Boolean.TRUE, p.doRemotePrefill());
        assertEquals(Boolean.FALSE, p.doRemoteDecode());
        assertEquals("eng-0", p.remoteEngineId());
        assertEquals(List.of(0, 5, 7), p.remoteBlockIds());
        assertEquals("10.0.0.5", p.remoteHost());
        assertEquals(5600, p.remotePort());
        assertEquals("cmpl-9", p.remoteRequestId());
        assertEquals(2, p.tpSize());
        assertEquals(JSON.readTree(json), JSON.readTree(p.toJson()));
    }

    @Test
    void earlyDesignPerRequestFieldsRoundTrip() throws Exception {
        String json = "{\"prefix_prompt_ids\":[1,2,3],\"kvcache_store_keys\":[\"-8311\"],\"kvcache_load_keys\":[\"-8311\"]}";
        KVTransferParams p = KVTransferParams.fromJson(json);
        assertEquals(List.of(1, 2, 3), p.prefixPromptIds());
        assertEquals(List.of("-8311"), p.kvcacheStoreKeys());
        assertEquals(List.of("-8311"), p.kvcacheLoadKeys());
        assertEquals(JSON.readTree(json), JSON.readTree(p.toJson()));
    }

    @Test
    void unknownFieldsArePreservedAndWrittenBackInOrder() throws Exception {
        String json = """
                {"transfer_id":"t","zeta":{"deep":[1,2.50,null,{"x":"y"}]},"alpha":"s","big":123456789012345678901234567890,
                 "exact":0.1000000000000000055511151231257827,"nothing":null}""";
        KVTransferParams p = KVTransferParams.fromJson(json);
        assertEquals(List.of("zeta", "alpha", "big", "exact", "nothing"), List.copyOf(p.unknownFields().keySet()));
        assertEquals(JSON.readTree(json), JSON.readTree(p.toJson()));
        String out = p.toJson();
        assertTrue(out.contains("2.50"), out);
        assertTrue(out.contains("123456789012345678901234567890"), out);
        assertTrue(out.contains("0.1000000000000000055511151231257827"), out);
        assertTrue(out.contains("\"nothing\":null"), "an unknown null is passed through: " + out);
    }

    @Test
    void unknownFieldsSurviveToBuilderAndCannotBeChangedFromOutside() {
        KVTransferParams p = KVTransferParams.fromJson("{\"custom\":{\"a\":1}}");
        ((ObjectNode) p.unknownFields().get("custom")).put("a", 2);
        assertEquals(1, p.unknownFields().get("custom").get("a").intValue());
        KVTransferParams q = p.toBuilder().transferId("t").build();
        assertEquals(1, q.unknownFields().get("custom").get("a").intValue());
        assertEquals("t", q.transferId());
        assertNull(p.transferId(), "the original is unchanged");
    }

    @Test
    void nodeGivenToFromJsonNodeIsNotKept() {
        ObjectNode node = JSON.createObjectNode();
        node.putObject("custom").put("a", 1);
        KVTransferParams p = KVTransferParams.fromJsonNode(node);
        ((ObjectNode) node.get("custom")).put("a", 9);
        assertEquals(1, p.toJsonNode().get("custom").get("a").intValue());
    }

    @Test
    void nullAndAbsentFieldsAreLeftOutOfTheJson() {
        KVTransferParams p = KVTransferParams.fromJson("{\"request_id\":null,\"transfer_id\":\"t\"}");
        assertNull(p.requestId());
        assertEquals("{\"transfer_id\":\"t\"}", p.toJson());
        assertEquals("{}", KVTransferParams.builder().build().toJson());
    }

    @Test
    void builderBuildsWhatTheProxySends() throws Exception {
        KVTransferParams p = KVTransferParams.builder().doRemoteDecode(true).doRemotePrefill(false)
                .transferId("t-1").storeUri("mooncake://m:50051").unknownField("x_trace", JSON.readTree("\"abc\""))
                .build();
        JsonNode n = JSON.readTree(p.toJson());
        assertTrue(n.get("do_remote_decode").booleanValue());
        assertFalse(n.get("do_remote_prefill").booleanValue());
        assertEquals("abc", n.get("x_trace").textValue());
        assertEquals(p, p.toBuilder().build());
        assertEquals(p.hashCode(), p.toBuilder().build().hashCode());
        assertNotEquals(p, p.toBuilder().transferId("t-2").build());
    }

    @Test
    void builderRefusesAKnownFieldAsUnknownAndInvalidValues() {
        assertThrows(KVException.class,
                () -> KVTransferParams.builder().unknownField("tp_size", JSON.getNodeFactory().numberNode(2)).build());
        assertThrows(KVException.class, () -> KVTransferParams.builder().remotePort(70000).build());
        assertThrows(KVException.class, () -> KVTransferParams.builder().tpSize(0).build());
        assertThrows(KVException.class, () -> KVTransferParams.builder().remoteBlockIds(List.of(1, -1)).build());
        assertThrows(KVException.class,
                () -> KVTransferParams.builder().keys(java.util.Arrays.asList("a", null)).build());
    }

    @Test
    void toStringMasksTheStoreUriPassword() {
        KVTransferParams p = KVTransferParams.builder().storeUri("valkey://user:s3cret@h:6379").build();
        assertFalse(p.toString().contains("s3cret"), p.toString());
        assertTrue(p.toString().contains("h:6379"), p.toString());
        KVTransferParams bad = KVTransferParams.builder().storeUri("::not a uri s3cret").build();
        assertFalse(bad.toString().contains("s3cret"), bad.toString());
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"request_id\":1}|request_id|string",
        "{\"store_uri\":[\"x\"]}|store_uri|string",
        "{\"token_hashes\":\"a\"}|token_hashes|list of strings",
        "{\"token_hashes\":[\"a\",1]}|token_hashes[1]|string",
        "{\"keys\":[null]}|keys[0]|string",
        "{\"do_remote_decode\":\"true\"}|do_remote_decode|boolean",
        "{\"do_remote_prefill\":1}|do_remote_prefill|boolean",
        "{\"remote_block_ids\":[1,\"2\"]}|remote_block_ids[1]|integer",
        "{\"remote_block_ids\":[[1,2]]}|remote_block_ids[0]|integer",
        "{\"remote_block_ids\":[-1]}|remote_block_ids[0]|integer",
        "{\"remote_port\":\"5600\"}|remote_port|integer",
        "{\"remote_port\":5600.0}|remote_port|integer",
        "{\"tp_size\":true}|tp_size|integer",
        "{\"prefix_prompt_ids\":[[1,2,3]]}|prefix_prompt_ids[0]|integer",
        "{\"kvcache_load_keys\":[[\"k\"]]}|kvcache_load_keys[0]|string"
    })
    void wrongTypesNameTheFieldAndTheExpectedType(String row) {
        String[] parts = row.split("\\|");
        KVException e = invalid(parts[0]);
        assertTrue(e.getMessage().contains("'" + parts[1] + "'") && e.getMessage().contains(parts[2]), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"remote_port\":65536}|remote_port",
        "{\"remote_port\":1e30}|remote_port",
        "{\"tp_size\":0}|tp_size",
        "{\"tp_size\":99999999999999999999999}|tp_size",
        "{\"prefix_prompt_ids\":[1,2147483648]}|prefix_prompt_ids[1]",
        "{\"remote_block_ids\":[1e999999999]}|remote_block_ids[0]"
    })
    void hugeNumbersAreErrorsNamingTheField(String row) {
        String[] parts = row.split("\\|");
        KVException e = invalid(parts[0]);
        assertTrue(e.getMessage().contains("'" + parts[1] + "'"), e.getMessage());
    }

    @Test
    void typeErrorsNeverEchoStringValues() {
        KVException e = invalid("{\"remote_port\":\"valkey://u:s3cret@h\"}");
        assertFalse(e.getMessage().contains("s3cret"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "not json", "[1]", "true", "{\"a\":", "{\"a\":1} {}", "{\"a\":1,\"a\":2}"})
    void notOneJsonObjectIsAnError(String json) {
        assertTrue(invalid(json).getMessage().contains("kv_transfer_params"));
    }
}
