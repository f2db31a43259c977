package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.Test;
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
}
