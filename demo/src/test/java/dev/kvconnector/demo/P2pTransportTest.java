package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.kvconnector.config.KvTransferConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * 1P1D peer to peer in one process: a producer and a consumer engine, each with its own transfer engine over the
 * test double (loopback TCP), P's HTTP server taking D's destination; no store. The v1 flow (D asks after P's
 * prefill) and the concurrent flow (P and D start together, D's destination may come first).
 */
class P2pTransportTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(11));
    private static final int MAX_TOKENS = 8;
    private static final long LAYER_TIMEOUT_MS = 1_500;

    private Engine single;
    private Engine producer;
    private Engine consumer;
    private EngineServer server;

    static String engineUri() {
        Path lib = Path.of(System.getProperty("kvc.mooncake.te.double",
                "../native/target/lib/libmooncake_te_double.so")).toAbsolutePath();
        if (!Files.exists(lib)) {
            throw new IllegalStateException("the transfer engine test double is not built at " + lib);
        }
        return "mooncake-te://127.0.0.1?protocol=tcp&library=" + lib;
    }

    @BeforeEach
    void start() {
        single = Engine.builder(WEIGHTS).build();
        producer = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, null).p2p(p2p(KVRole.PRODUCER)).build();
        consumer = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, null).p2p(p2p(KVRole.CONSUMER)).build();
        server = EngineServer.start(producer, "127.0.0.1", 0, "m");
    }

    static KvTransferConfig p2p(KVRole role) {
        return P2pTransport.kvTransferConfig(role, engineUri(), LAYER_TIMEOUT_MS, null, null);
    }

    @AfterEach
    void stop() {
        server.close();
        consumer.close();
        producer.close();
        single.close();
    }

    private KVTransferParams prefillOnP(int[] prompt) {
        KVTransferParams asked = KVTransferParams.builder().doRemoteDecode(true).doRemotePrefill(false).build();
        Generation p = producer.generate(prompt, 1, asked, t -> { });
        return p.kvTransferParams().toBuilder().remoteHost("127.0.0.1").remotePort(server.baseUri().getPort())
                .build();
    }

    @Test
    void decodeLoadsThePromptFromPsMemoryTokenForTokenAndPFreesItsBlocks() throws InterruptedException {
        int[] prompt = ByteTokenizer.encode("peer to peer: the KV goes from P's blocks into D's blocks directly");
        int free = producer.freeBlocks();

        Generation d = consumer.generate(prompt, MAX_TOKENS, prefillOnP(prompt), t -> { });

        assertEquals(Generation.PrefillSource.LOADED, d.prefill(), "D recomputed: " + d.missReason());
        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), d.tokens());
        awaitFree(producer, free);
        var pm = producer.connector().metrics();
        var dm = consumer.connector().metrics();
        assertEquals(pm.insertedBytes(), dm.droppedBytes());
        assertEquals(WEIGHTS.config().kvLayout().layerBytes(prompt.length) * WEIGHTS.config().layers(),
                dm.droppedBytes());
    }

    @Test
    void inTheConcurrentFlowPAndDStartTogetherAndDLoadsThePromptTokenForToken() throws Exception {
        int[] prompt = ByteTokenizer.encode("concurrent: D sends its destination while P computes its prefill");
        int free = producer.freeBlocks();
        // The proxy's concurrent flow: both get the transfer id, D also P's address.
        KVTransferParams toD = KVTransferParams.builder().transferId("t-concurrent").doRemotePrefill(true)
                .doRemoteDecode(false).remoteHost("127.0.0.1").remotePort(server.baseUri().getPort()).build();
        KVTransferParams toP = KVTransferParams.builder().transferId("t-concurrent").doRemoteDecode(true)
                .doRemotePrefill(false).build();

        CompletableFuture<Generation> d = CompletableFuture.supplyAsync(() -> consumer.generate(prompt, MAX_TOKENS,
                toD, t -> { }));
        Generation p = producer.generate(prompt, 1, toP, t -> { });
        Generation got = d.get(30, TimeUnit.SECONDS);

        assertEquals("t-concurrent", p.kvTransferParams().transferId());
        assertEquals(Generation.PrefillSource.LOADED, got.prefill(), "D recomputed: " + got.missReason());
        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), got.tokens());
        assertEquals(producer.connector().metrics().insertedBytes(), consumer.connector().metrics().droppedBytes());
        awaitFree(producer, free);
    }

    /** P frees its blocks when both its engine and the transfer are done with them, which may be just after. */
    static void awaitFree(Engine engine, int free) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (engine.freeBlocks() != free && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(free, engine.freeBlocks(), "P kept blocks after sending them");
    }

    @Test
    void aDestinationWithoutItsTokenCountIsRefusedNamingTheField() {
        KVTransferParams bad = KVTransferParams.builder().transferId("t-bad").remoteHost("127.0.0.1").remotePort(1)
                .remoteBlockIds(List.of(1)).unknownField("kvc_cache_addrs", JsonNodeFactory.instance.arrayNode())
                .unknownField("kvc_layout", JsonNodeFactory.instance.textNode("0")).build();
        KVException e = assertThrows(KVException.class, () -> producer.sendToPeer(bad));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'kvc_tokens'"), e.getMessage());
    }

    @Test
    void aTransferPDoesNotHoldIsATimedOutMissAndDRecomputesTheSameTokens() {
        int[] prompt = ByteTokenizer.encode("a transfer id that P never prefilled");
        KVTransferParams unknown = KVTransferParams.builder().transferId("never-prefilled").doRemotePrefill(true)
                .doRemoteDecode(false).remoteHost("127.0.0.1").remotePort(server.baseUri().getPort()).build();

        Generation d = consumer.generate(prompt, MAX_TOKENS, unknown, t -> { });

        assertEquals(Generation.PrefillSource.COMPUTED, d.prefill());
        assertEquals(MissReason.TIMED_OUT, d.missReason());
        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), d.tokens());
    }

    @Test
    void aStoreEngineRefusesToSendPeerToPeer() {
        KVException e = assertThrows(KVException.class, () -> single.sendToPeer(
                KVTransferParams.builder().transferId("t").build()));
        assertEquals(ErrorCode.UNSUPPORTED, e.code());
    }
}
