package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** 1P1D in one process: a producer and a consumer engine, each with its own connector, over one memory: store. */
class DisaggregatedPrefillTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(11));
    private static final int MAX_TOKENS = 12;

    private KVStore store;
    private KVStoreConnector pConnector;
    private KVStoreConnector dConnector;
    private Engine single;
    private Engine producer;

    @BeforeEach
    void start() {
        store = KVStores.open("memory:?capacity=256MiB");
        pConnector = connector();
        dConnector = connector();
        single = Engine.builder(WEIGHTS).build();
        producer = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, pConnector).build();
    }

    private KVStoreConnector connector() {
        ModelConfig c = WEIGHTS.config();
        return KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId()).layerTimeoutMillis(5_000).build();
    }

    @AfterEach
    void stop() {
        single.close();
        producer.close();
        pConnector.close();
        dConnector.close();
        store.close();
    }

    private static KVTransferParams transfer(String id) {
        return KVTransferParams.builder().transferId(id).build();
    }

    @Test
    void decodeInstanceMatchesSingleInstanceWithoutRunningThePrefill() {
        // 300 tokens: two 256-token chunks, so the hit covers a chunk boundary.
        int[] prompt = ByteTokenizer.encode("Disaggregated prefill: P computes, D decodes. ".repeat(7).substring(0, 300));
        int[] expected = single.generate(prompt, MAX_TOKENS).tokens();
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            Generation p = producer.generate(prompt, 1, transfer("req-1"), t -> { });
            assertEquals(1, producer.metrics().inserts());
            assertEquals("req-1", p.kvTransferParams().transferId());
            assertEquals(Boolean.TRUE, p.kvTransferParams().doRemotePrefill());
            assertEquals(expected[0], p.tokens()[0]);

            Generation d = decode.generate(prompt, MAX_TOKENS, transfer("req-1"), t -> { });

            assertArrayEquals(expected, d.tokens());
            assertEquals(Generation.PrefillSource.LOADED, d.prefill());
            assertEquals(1, dConnector.metrics().hits());
            assertEquals(0, dConnector.metrics().totalMisses());
            assertEquals(0, decode.metrics().prefillPasses(), "D must not run the prefill");
            assertEquals(0, decode.metrics().prefillTokens());
            assertEquals(MAX_TOKENS - 1, decode.metrics().decodeSteps());
            assertFalse(store.exists(keys(prompt, "req-1").manifestKey()), "the consumed entry is removed");
        }
    }

    @Test
    void wipedStoreFallsBackToRecomputeAndCountsAbsent() {
        int[] prompt = ByteTokenizer.encode("This entry will be gone before D looks.");
        int[] expected = single.generate(prompt, MAX_TOKENS).tokens();
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            producer.generate(prompt, 1, transfer("req-2"), t -> { });
            ChunkKeys k = keys(prompt, "req-2");
            assertTrue(store.exists(k.manifestKey()));
            store.remove(k.manifestKey());
            store.remove(k.hiddenKey());
            for (String layerKey : k.layerKeys()) {
                store.remove(layerKey);
            }

            Generation d = decode.generate(prompt, MAX_TOKENS, transfer("req-2"), t -> { });

            assertArrayEquals(expected, d.tokens());
            assertEquals(Generation.PrefillSource.COMPUTED, d.prefill());
            assertEquals(MissReason.ABSENT, d.missReason());
            assertEquals(1L, dConnector.metrics().misses().get(MissReason.ABSENT));
            assertEquals(1, decode.metrics().misses(MissReason.ABSENT));
            assertEquals(1, decode.metrics().prefillPasses());
            assertEquals(prompt.length, decode.metrics().prefillTokens());
        }
    }

    @Test
    void layerWiseLoadStartedBeforeTheProducerGivesTheSameTokens() throws Exception {
        int[] prompt = ByteTokenizer.encode("Layer by layer, while the producer is still computing.");
        int[] expected = single.generate(prompt, MAX_TOKENS).tokens();
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).layerWise(true).build()) {
            CompletableFuture<Generation> d = CompletableFuture.supplyAsync(
                    () -> decode.generate(prompt, MAX_TOKENS, transfer("req-3"), t -> { }));
            producer.generate(prompt, 1, transfer("req-3"), t -> { });

            Generation g = d.get(30, TimeUnit.SECONDS);
            assertArrayEquals(expected, g.tokens());
            assertEquals(Generation.PrefillSource.LOADED, g.prefill());
            assertEquals(0, decode.metrics().prefillPasses());
            assertEquals(WEIGHTS.config().layers(), dConnector.metrics().dropLayer().count());
        }
    }

    @Test
    void aLayerWiseLoadCountsWaitingForTheProducerApartFromTheCopy() throws Exception {
        int[] prompt = ByteTokenizer.encode("The consumer starts first and waits for every layer.");
        long producerDelayMillis = 400;
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).layerWise(true).build()) {
            CompletableFuture<Generation> d = CompletableFuture.supplyAsync(
                    () -> decode.generate(prompt, MAX_TOKENS, transfer("req-wait"), t -> { }));
            Thread.sleep(producerDelayMillis);
            producer.generate(prompt, 1, transfer("req-wait"), t -> { });

            assertEquals(Generation.PrefillSource.LOADED, d.get(30, TimeUnit.SECONDS).prefill());
            var m = dConnector.metrics();
            assertEquals(WEIGHTS.config().layers(), m.dropWait().count());
            assertTrue(m.dropWait().maxNanos() >= TimeUnit.MILLISECONDS.toNanos(producerDelayMillis) * 3 / 4,
                    "layer 0 waited " + m.dropWait().maxNanos() + " ns for a producer that started "
                            + producerDelayMillis + " ms late");
            // The copy of a tiny model's layer from memory: far below the producer's delay, even on a loaded machine.
            assertTrue(m.dropLayer().maxNanos() < TimeUnit.MILLISECONDS.toNanos(producerDelayMillis) / 2,
                    "the copy alone took " + m.dropLayer().maxNanos() + " ns: the wait is counted in it");
        }
    }

    @Test
    void aWholeLoadWaitsForNothing() {
        int[] prompt = ByteTokenizer.encode("Committed before the consumer asks.");
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            producer.generate(prompt, 1, transfer("req-nowait"), t -> { });
            assertEquals(Generation.PrefillSource.LOADED,
                    decode.generate(prompt, 4, transfer("req-nowait"), t -> { }).prefill());
            assertEquals(WEIGHTS.config().layers(), dConnector.metrics().dropLayer().count());
            assertEquals(0, dConnector.metrics().dropWait().count());
        }
    }

    @Test
    void anotherTransferIdDoesNotSeeTheEntry() {
        int[] prompt = ByteTokenizer.encode("Same prompt, other transfer.");
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            producer.generate(prompt, 1, transfer("req-4"), t -> { });
            Generation d = decode.generate(prompt, 4, transfer("req-5"), t -> { });
            assertEquals(MissReason.ABSENT, d.missReason());
            assertEquals(1, decode.metrics().prefillPasses());
            assertArrayEquals(single.generate(prompt, 4).tokens(), d.tokens());
        }
    }

    @Test
    void aConsumerWithOtherWeightsMissesInsteadOfUsingForeignKv() {
        ModelWeights other = ModelWeights.random(ModelConfig.tiny(12));
        int[] prompt = ByteTokenizer.encode("Different seed, different model id, different keys.");
        try (KVStoreConnector c = KVStoreConnector.builder(store, other.config().kvLayout())
                .modelId(other.config().modelId()).build();
             Engine decode = Engine.builder(other).role(KVRole.CONSUMER, c).build();
             Engine plain = Engine.builder(other).build()) {
            producer.generate(prompt, 1, transfer("req-6"), t -> { });
            Generation d = decode.generate(prompt, 6, transfer("req-6"), t -> { });
            assertEquals(MissReason.ABSENT, d.missReason());
            assertArrayEquals(plain.generate(prompt, 6).tokens(), d.tokens());
        }
    }

    @Test
    void aNixlStyleRequestGetsATransferIdThatTheDecodeSideCanUse() {
        int[] prompt = ByteTokenizer.encode("The proxy sends do_remote_decode and no transfer id.");
        KVTransferParams toP = KVTransferParams.builder().doRemoteDecode(true).doRemotePrefill(false).build();
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            KVTransferParams answer = producer.generate(prompt, 1, toP, t -> { }).kvTransferParams();
            assertTrue(answer.transferId() != null && !answer.transferId().isEmpty());
            Generation d = decode.generate(prompt, 5, answer, t -> { });
            assertNull(d.missReason());
            assertEquals(Generation.PrefillSource.LOADED, d.prefill());
            assertArrayEquals(single.generate(prompt, 5).tokens(), d.tokens());
        }
    }

    @Test
    void bothRoleLoadsWhatItInsertedEarlier() {
        int[] prompt = ByteTokenizer.encode("kv_both inserts on a miss and loads on a hit.");
        try (Engine both = Engine.builder(WEIGHTS).role(KVRole.BOTH, dConnector).build()) {
            Generation first = both.generate(prompt, 6, transfer("req-7"), t -> { });
            Generation second = both.generate(prompt, 6, transfer("req-7"), t -> { });
            assertEquals(Generation.PrefillSource.COMPUTED, first.prefill());
            assertEquals(Generation.PrefillSource.LOADED, second.prefill());
            assertArrayEquals(first.tokens(), second.tokens());
            assertEquals(1, both.metrics().prefillPasses());
            assertEquals(1, both.metrics().inserts());
            assertEquals(Boolean.TRUE, first.kvTransferParams().doRemotePrefill());
            assertEquals(Boolean.FALSE, second.kvTransferParams().doRemotePrefill(), "a load stores nothing new");
        }
    }

    @Test
    void aPartialHitComputesOnlyTheMissingSuffix() {
        int[] prompt = ByteTokenizer.encode("Chunk one is stored, chunk two is lost. ".repeat(8).substring(0, 300));
        int[] expected = single.generate(prompt, MAX_TOKENS).tokens();
        try (Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).build()) {
            producer.generate(prompt, 1, transfer("req-8"), t -> { });
            assertTrue(store.remove(keys(prompt, "req-8", 1).manifestKey()));

            Generation d = decode.generate(prompt, MAX_TOKENS, transfer("req-8"), t -> { });

            assertArrayEquals(expected, d.tokens());
            assertEquals(Generation.PrefillSource.PARTIAL, d.prefill());
            assertEquals(1, dConnector.metrics().partialHits());
            assertEquals(1, decode.metrics().partialLoads());
            assertEquals(300 - 256, decode.metrics().prefillTokens(), "only the tokens after the stored chunk");
        }
    }

    @Test
    void aLayerWiseLoadWithNoProducerTimesOutAndRecomputes() {
        int[] prompt = ByteTokenizer.encode("Nobody is producing this.");
        ModelConfig c = WEIGHTS.config();
        try (KVStoreConnector impatient = KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId())
                .layerTimeoutMillis(200).build();
             Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, impatient).layerWise(true).build()) {
            Generation d = decode.generate(prompt, 4, transfer("req-9"), t -> { });
            assertEquals(MissReason.TIMED_OUT, d.missReason());
            assertEquals(1, decode.metrics().misses(MissReason.TIMED_OUT));
            assertArrayEquals(single.generate(prompt, 4).tokens(), d.tokens());
        }
    }

    @Test
    void concurrentRequestsOnOneEngineGetTheirOwnBlocksAndTokens() throws Exception {
        String[] prompts = {"first concurrent prompt", "second, a little longer prompt", "3rd", "the fourth one"};
        int[][] serial = new int[prompts.length][];
        for (int i = 0; i < prompts.length; i++) {
            serial[i] = single.generate(ByteTokenizer.encode(prompts[i]), 10).tokens();
        }
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<int[]>> futures = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                for (String prompt : prompts) {
                    futures.add(pool.submit(() -> single.generate(ByteTokenizer.encode(prompt), 10).tokens()));
                }
            }
            for (int i = 0; i < futures.size(); i++) {
                assertArrayEquals(serial[i % prompts.length], futures.get(i).get(30, TimeUnit.SECONDS));
            }
        }
        assertEquals(WEIGHTS.config().maxContext() / 16 * 4, single.freeBlocks());
    }

    private ChunkKeys keys(int[] prompt, String transferId) {
        return keys(prompt, transferId, 0);
    }

    private ChunkKeys keys(int[] prompt, String transferId, int chunk) {
        RequestTokens r = RequestTokens.of(prompt).inNamespace(transferId);
        return KeySchemes.byName(KeySchemes.DEFAULT).plan(pConnector.keyContext(), r).chunks().get(chunk);
    }

    @Test
    void withVllmV1KeysDecodeLoadsEveryFullBlockAndRecomputesOnlyTheTail() {
        // 100 tokens: 6 full blocks of 16 are stored; vLLM V1 values hold no hidden states, so D computes the 4
        // trailing tokens itself, and would recompute the last one even if the prompt were whole blocks.
        int[] prompt = ByteTokenizer.encode("vLLM V1 keys: one object per full block, no hidden states. ".repeat(2)
                .substring(0, 100));
        int[] expected = single.generate(prompt, MAX_TOKENS).tokens();
        ModelConfig c = WEIGHTS.config();
        try (KVStoreConnector p = KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId())
                     .keyScheme("vllm-v1").dropMode(dev.kvconnector.connector.DropMode.RETAIN).build();
             KVStoreConnector d = KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId())
                     .keyScheme("vllm-v1").dropMode(dev.kvconnector.connector.DropMode.RETAIN).build();
             Engine prefill = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, p).build();
             Engine decode = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, d).build()) {
            assertFalse(p.holdsHiddenStates());
            prefill.generate(prompt, 1, transfer("req-v1"), t -> { });
            assertEquals(1, prefill.metrics().inserts());
            assertEquals(96, d.lookup(RequestTokens.of(prompt)));

            Generation g = decode.generate(prompt, MAX_TOKENS, transfer("req-v1"), t -> { });

            assertArrayEquals(expected, g.tokens());
            assertEquals(1, decode.metrics().prefillPasses());
            assertEquals(4, decode.metrics().prefillTokens(), "D computes only the tokens after the last full block");
            assertEquals(1, d.metrics().partialHits(), "96 of the 100 tokens: every full block");
            assertEquals(6L * c.kvLayout().numLayers() * c.kvLayout().blockBytes() * 2, d.metrics().droppedBytes());
        }
    }
}
