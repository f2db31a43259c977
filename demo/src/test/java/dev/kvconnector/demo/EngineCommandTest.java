package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class EngineCommandTest {
    private static EngineCommand parse(String... args) {
        EngineCommand cmd = new EngineCommand();
        new CommandLine(cmd).parseArgs(args);
        return cmd;
    }

    @Test
    void startsAProducerOnAFreePortAndStopsCleanly() throws Exception {
        try (EngineCommand.Running r = parse("--port", "0", "--tiny", "--role", "kv_producer", "--store",
                "memory:?capacity=16MiB", "--seed", "4", "--layer-wise").start();
             HttpClient http = HttpClient.newHttpClient()) {
            assertEquals(KVRole.PRODUCER, r.engine().role());
            assertEquals(4, r.engine().config().seed());
            assertTrue(r.server().port() > 0);
            HttpResponse<String> health = http.send(HttpRequest.newBuilder(r.server().baseUri().resolve("/health"))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode());
        }
    }

    @Test
    void aConsumerWithoutAStoreIsAConfigError() {
        KVException e = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer").start());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("--store"), e.getMessage());
        assertThrows(KVException.class, () -> parse("--tiny", "--role", "decoder", "--store", "memory:").start());
    }

    @Test
    void peerToPeerBesideAStoreNeedsAStoreAndAKeySchemeWithoutNamespace() {
        KVException noStore = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer",
                "--transport", "p2p+store", "--p2p-engine", P2pTransportTest.engineUri()).start());
        assertEquals(ErrorCode.INVALID_CONFIG, noStore.code());
        assertTrue(noStore.getMessage().contains("--store"), noStore.getMessage());

        KVException namespaced = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer",
                "--transport", "p2p+store", "--p2p-engine", P2pTransportTest.engineUri(), "--store", "memory:",
                "--scheme", "kvc-v1").start());
        assertEquals(ErrorCode.INVALID_CONFIG, namespaced.code());
        assertTrue(namespaced.getMessage().contains("vllm-v1"), namespaced.getMessage());

        KVException unknown = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer",
                "--transport", "p2p+valkey").start());
        assertTrue(unknown.getMessage().contains("store, p2p or p2p+store"), unknown.getMessage());
    }

    @Test
    void aPeerToPeerConsumerBesideAStoreStartsWithBothTransports() {
        try (EngineCommand.Running r = parse("--port", "0", "--tiny", "--role", "kv_consumer", "--transport",
                "p2p+store", "--p2p-engine", P2pTransportTest.engineUri(), "--store", "memory:?capacity=16MiB",
                "--scheme", "vllm-v1").start()) {
            assertEquals(List.of("p2p", "store"), List.copyOf(r.engine().transports().keySet()));
        }
    }

    @Test
    void aPrefixCacheOnAConsumerIsAConfigErrorThatLeavesNothingOpen() {
        KVException e = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer", "--store",
                "memory:?capacity=16MiB", "--share-prefixes", "--prefix-cache", "--chunk-tokens", "16").start());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("loads its prompts from the store"), e.getMessage());
    }

    @Test
    void savingTheDecodeKvOnAProducerOrWithoutSharedPrefixesIsAConfigError() {
        KVException producer = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_producer",
                "--store", "memory:?capacity=16MiB", "--share-prefixes", "--save-decode-kv").start());
        assertEquals(ErrorCode.INVALID_CONFIG, producer.code());
        assertTrue(producer.getMessage().contains("kv_producer"), producer.getMessage());
        KVException namespaced = assertThrows(KVException.class, () -> parse("--tiny", "--role", "kv_consumer",
                "--store", "memory:?capacity=16MiB", "--save-decode-kv").start());
        assertEquals(ErrorCode.INVALID_CONFIG, namespaced.code());
        assertTrue(namespaced.hint().contains("--share-prefixes"), namespaced.hint());
    }

    @Test
    void aDecodeEngineSavingItsKvCountsItsSavesInKvMetrics() throws Exception {
        try (EngineCommand.Running r = parse("--port", "0", "--tiny", "--role", "kv_consumer", "--store",
                "memory:?capacity=16MiB", "--share-prefixes", "--save-decode-kv", "--chunk-tokens", "16").start();
             HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> answer = http.send(HttpRequest.newBuilder(r.server().baseUri()
                    .resolve("/v1/completions")).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"" + "z".repeat(40)
                            + "\",\"max_tokens\":10}")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            JsonNode m = new ObjectMapper().readTree(http.send(HttpRequest.newBuilder(r.server().baseUri()
                    .resolve("/kv/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body());
            // Nothing in the store: D computed the prompt, then saved the 3 full chunks of its 49 computed tokens.
            assertEquals(1, m.at("/engine/misses/ABSENT").asLong(), m.toString());
            assertEquals(1, m.at("/engine/decode_save/saves").asLong(), m.toString());
            assertEquals(3, m.at("/engine/decode_save/new_chunks").asLong(), m.toString());
            assertEquals(0, m.at("/engine/decode_save/rewritten_chunks").asLong(), m.toString());
            assertEquals(0, m.at("/engine/decode_save/failures").asLong(), m.toString());
        }
    }

    @Test
    void kvMetricsReportsThePrefixCacheAndEachTierOfATieredStore(@TempDir Path dir) throws Exception {
        String tiered = "tiered:[memory:?capacity=16MiB][shm:/kvc-cmd-" + UUID.randomUUID().toString().substring(0, 8)
                + "?capacity=16MiB&dir=" + dir + "]";
        try (EngineCommand.Running r = parse("--port", "0", "--tiny", "--role", "kv_producer", "--store", tiered,
                "--share-prefixes", "--prefix-cache", "--chunk-tokens", "16", "--key-tag", "t1").start();
             HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> answer = http.send(HttpRequest.newBuilder(r.server().baseUri()
                    .resolve("/v1/completions")).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"" + "y".repeat(40)
                            + "\",\"max_tokens\":1}")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            JsonNode m = new ObjectMapper().readTree(http.send(HttpRequest.newBuilder(r.server().baseUri()
                    .resolve("/kv/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body());

            assertEquals(40, m.at("/engine/prompt_tokens").asLong());
            assertEquals(16, m.at("/engine/prefix_cache/chunk_tokens").asInt());
            assertEquals(2, m.at("/engine/prefix_cache/chunks").asLong(), "40 tokens written: two full chunks");
            assertEquals(2, m.at("/store/tiers").size(), m.path("store").toString());
            for (JsonNode tier : m.at("/store/tiers")) {
                assertTrue(tier.path("bytes_written").asLong() > 0, "written through to every tier: " + tier);
            }
            assertTrue(m.at("/store/tiers/1/uri").asText().startsWith("shm:"), m.path("store").toString());
            assertEquals(0, m.at("/store/write_back/depth").asLong());
            // The key tag is part of the model id the keys bind.
            assertTrue(r.connector().keyContext().modelId().endsWith("@t1"), r.connector().keyContext().modelId());
        }
    }
}
