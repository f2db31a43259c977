package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 1P1D with both paths at once ({@code --transport p2p+store}) in one process: the request in flight moves from P's
 * blocks into D's, and P's insert also goes into a vllm-v1 store, from which D loads the same prompt later with no P.
 */
class P2pWithStoreEngineTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(5));
    private static final int MAX_TOKENS = 6;

    @TempDir
    Path dir;
    private Engine single;
    private Engine producer;
    private Engine consumer;
    private EngineServer server;

    private KVStoreConnector transport(Engine e, String name) {
        return e.transports().get(name);
    }

    @BeforeEach
    void start() {
        String store = "shm:/p2p-store-" + UUID.randomUUID() + "?capacity=64MiB&dir=" + dir;
        single = Engine.builder(WEIGHTS).build();
        producer = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, null).p2p(P2pTransport.kvTransferConfig(
                KVRole.PRODUCER, P2pTransportTest.engineUri(), 1_500, store, "vllm-v1")).build();
        consumer = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, null).p2p(P2pTransport.kvTransferConfig(
                KVRole.CONSUMER, P2pTransportTest.engineUri(), 1_500, store, "vllm-v1")).build();
        server = EngineServer.start(producer, "127.0.0.1", 0, "m");
    }

    @AfterEach
    void stop() {
        server.close();
        consumer.close();
        producer.close();
        single.close();
    }

    @Test
    void theRequestInFlightComesFromPAndTheSamePromptLaterFromTheStoreTokenForToken() throws Exception {
        int[] prompt = ByteTokenizer.encode("both paths: P2P for the request in flight, a store for the prefix reuse");
        int[] want = single.generate(prompt, MAX_TOKENS).tokens();
        int free = producer.freeBlocks();

        Generation p = producer.generate(prompt, 1, KVTransferParams.builder().doRemoteDecode(true)
                .doRemotePrefill(false).build(), t -> { });
        KVTransferParams fromP = p.kvTransferParams().toBuilder().remoteHost("127.0.0.1")
                .remotePort(server.baseUri().getPort()).build();
        assertArrayEquals(want, consumer.generate(prompt, MAX_TOKENS, fromP, t -> { }).tokens());
        P2pTransportTest.awaitFree(producer, free);

        long p2pBytes = consumer.transports().get("p2p").metrics().droppedBytes();
        assertEquals(transport(producer, "p2p").metrics().insertedBytes(), p2pBytes, "P2P: P wrote what D accepted");
        assertEquals(WEIGHTS.config().kvLayout().layerBytes(prompt.length) * WEIGHTS.config().layers(), p2pBytes);
        assertEquals(0, transport(consumer, "store").metrics().droppedBytes(), "D read the store for a request in "
                + "flight");
        long stored = transport(producer, "store").metrics().insertedBytes();
        int fullBlocks = prompt.length / ModelConfig.BLOCK_SIZE * ModelConfig.BLOCK_SIZE;
        assertEquals(WEIGHTS.config().kvLayout().layerBytes(fullBlocks) * WEIGHTS.config().layers(), stored,
                "the store keeps the prompt's full blocks, as vLLM V1's format does");

        Generation again = consumer.generate(prompt, MAX_TOKENS, null, t -> { });
        assertArrayEquals(want, again.tokens());
        assertEquals(2, consumer.metrics().loadedPrefills(), "the second request was not loaded from the store");
        assertEquals(stored, transport(consumer, "store").metrics().droppedBytes(), "store: D read what P stored");
        assertEquals(p2pBytes, transport(consumer, "p2p").metrics().droppedBytes(), "the second request used P2P");
    }

    @Test
    void aStoreWhoseKeysBindTheTransferIdIsRefusedBesidePeerToPeer() {
        KVException e = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS).role(KVRole.CONSUMER, null)
                .p2p(P2pTransport.kvTransferConfig(KVRole.CONSUMER, P2pTransportTest.engineUri(), 1_500,
                        "memory:", "kvc-v1")).build().close());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("vllm-v1"), e.getMessage());
    }
}
