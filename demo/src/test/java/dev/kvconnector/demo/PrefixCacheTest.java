package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The engine's own prefix cache: a prompt that starts with a finished request's chunks reuses their blocks and
 * computes only the rest, with the same tokens as an engine without the cache; the least recently used chunks no
 * request holds are evicted when blocks run short, and each chunk cached or evicted is reported.
 */
class PrefixCacheTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(5));
    private static final int CHUNK = 16;
    private static final int MAX_TOKENS = 6;

    private static int[] concat(int[]... parts) {
        return Arrays.stream(parts).flatMapToInt(Arrays::stream).toArray();
    }

    private static List<String> hashes(int[] tokens, int fullChunks) {
        byte[] root = KvcV1KeyScheme.rootHash(KeyContext.of(WEIGHTS.config().modelId(), WEIGHTS.config().kvLayout()),
                null);
        return KvcV1KeyScheme.planFromRoot(root, CHUNK, 0, RequestTokens.of(Arrays.copyOf(tokens, fullChunks * CHUNK)))
                .chunks().stream().map(ChunkKeys::hashHex).toList();
    }

    @Test
    void aNextTurnReusesThePreviousTurnsChunksAndGivesTheSameTokens() {
        List<KvEvent> events = new CopyOnWriteArrayList<>();
        try (Engine plain = Engine.builder(WEIGHTS).build();
             Engine cached = Engine.builder(WEIGHTS).prefixCache(CHUNK, events::add, "engine-a").build()) {
            int[] turn1 = ByteTokenizer.encode("System: answer briefly. User: what is a KV cache, and why page it?");
            Generation g1 = cached.generate(turn1, MAX_TOKENS);
            assertArrayEquals(plain.generate(turn1, MAX_TOKENS).tokens(), g1.tokens());
            assertEquals(Generation.PrefillSource.COMPUTED, g1.prefill());
            // The prompt and every generated token but the last had their KV written: 66 + 5 = 71 tokens, 4 chunks.
            int written = turn1.length + MAX_TOKENS - 1;
            assertEquals(written / CHUNK, cached.prefixCacheStats().chunks());

            int[] turn2 = concat(turn1, g1.tokens(), ByteTokenizer.encode(" User: and a prefix cache?"));
            Generation g2 = cached.generate(turn2, MAX_TOKENS);

            assertArrayEquals(plain.generate(turn2, MAX_TOKENS).tokens(), g2.tokens());
            assertEquals(Generation.PrefillSource.CACHED, g2.prefill());
            int reused = written / CHUNK * CHUNK;
            assertEquals(reused, cached.prefixCacheStats().hitTokens());
            assertEquals(turn1.length + turn2.length - reused, cached.metrics().prefillTokens());

            List<String> want = hashes(concat(turn2, g2.tokens()), (turn2.length + MAX_TOKENS - 1) / CHUNK);
            List<KvEvent.Stored> stored = events.stream().map(e -> assertInstanceOf(KvEvent.Stored.class, e)).toList();
            assertEquals(want, stored.stream().map(KvEvent.Stored::chunkHash).toList(), "one event per chunk, once");
            String root = HexFormat.of().formatHex(KvcV1KeyScheme.rootHash(KeyContext.of(WEIGHTS.config().modelId(),
                    WEIGHTS.config().kvLayout()), null));
            assertEquals(root, stored.get(0).parentHash());
            for (int c = 1; c < stored.size(); c++) {
                assertEquals(stored.get(c - 1).chunkHash(), stored.get(c).parentHash());
                assertEquals(PrefixCache.MEDIUM, stored.get(c).storeUri());
                assertEquals(CHUNK, stored.get(c).tokens());
                assertEquals(stored.get(c - 1).sequence() + 1, stored.get(c).sequence());
            }
        }
    }

    @Test
    void aRepeatedPromptStillComputesItsLastToken() {
        try (Engine plain = Engine.builder(WEIGHTS).build();
             Engine cached = Engine.builder(WEIGHTS).prefixCache(CHUNK, null, "engine-b").build()) {
            int[] prompt = ByteTokenizer.encode("x".repeat(4 * CHUNK));
            int[] want = plain.generate(prompt, MAX_TOKENS).tokens();
            cached.generate(prompt, MAX_TOKENS);
            Generation again = cached.generate(prompt, MAX_TOKENS);
            assertArrayEquals(want, again.tokens());
            assertEquals(3 * CHUNK, cached.prefixCacheStats().hitTokens(), "the chunk holding the last token is recomputed");
            assertEquals(4 * CHUNK + CHUNK, cached.metrics().prefillTokens());
        }
    }

    @Test
    void blocksRunningShortEvictTheLeastRecentlyUsedChunksAndReportThem() {
        List<KvEvent> events = new CopyOnWriteArrayList<>();
        // 12 blocks of 16 tokens: each 90-token request with 6 generated needs 6.
        try (Engine plain = Engine.builder(WEIGHTS).build();
             Engine cached = Engine.builder(WEIGHTS).cacheBlocks(12).prefixCache(CHUNK, events::add, "engine-c")
                     .build()) {
            int[] a = ByteTokenizer.encode("a".repeat(90));
            int[] b = ByteTokenizer.encode("b".repeat(90));
            int[] c = ByteTokenizer.encode("c".repeat(90));
            cached.generate(a, MAX_TOKENS);
            cached.generate(b, MAX_TOKENS);
            assertEquals(10, cached.prefixCacheStats().chunks(), "a and b keep 5 chunks each");

            Generation gc = cached.generate(c, MAX_TOKENS);

            assertArrayEquals(plain.generate(c, MAX_TOKENS).tokens(), gc.tokens());
            List<KvEvent.Removed> removed = events.stream().filter(KvEvent.Removed.class::isInstance)
                    .map(KvEvent.Removed.class::cast).toList();
            assertEquals(4, removed.size(), "2 blocks were free and c needs 6: " + removed);
            List<String> aHashes = hashes(a, 5);
            // a was used least recently, and its deepest chunks go first.
            assertEquals(List.of(aHashes.get(4), aHashes.get(3), aHashes.get(2), aHashes.get(1)),
                    removed.stream().map(KvEvent.Removed::chunkHash).toList());
            removed.forEach(r -> assertEquals(RemovalReason.EVICTED, r.reason()));
            assertEquals(4, cached.prefixCacheStats().evictedChunks());
            // a's first chunk is still there and still serves.
            Generation again = cached.generate(a, MAX_TOKENS);
            assertArrayEquals(plain.generate(a, MAX_TOKENS).tokens(), again.tokens());
            assertEquals(Generation.PrefillSource.CACHED, again.prefill());
        }
    }

    @Test
    void aChunkARequestHoldsIsNeverEvicted() {
        BlockAllocator blocks = new BlockAllocator(4);
        byte[] root = new byte[32];
        PrefixCache cache = new PrefixCache(blocks, CHUNK, CHUNK, root, 2, null, "t");
        int[] prompt = new int[3 * CHUNK];
        int[] own = cache.allocate(3);
        cache.finish(PrefixCache.Hold.NONE, prompt, prompt.length, own);
        assertEquals(1, blocks.freeBlocks());

        PrefixCache.Hold hold = cache.acquire(prompt);
        assertEquals(2 * CHUNK, hold.tokens());
        // Only the unheld third chunk can go: 2 free after it, and 3 are asked for.
        KVException e = assertThrows(KVException.class, () -> cache.allocate(3));
        assertEquals(ErrorCode.BUSY, e.code());
        assertEquals(2, cache.stats().chunks());
        assertEquals(2, cache.stats().heldChunks());

        cache.release(hold, new int[0]);
        assertEquals(4, cache.allocate(4).length, "released chunks are evictable again");
    }

    @Test
    void badSettingsAreRefusedNamingTheCause() {
        KVException notBlocks = assertThrows(KVException.class,
                () -> Engine.builder(WEIGHTS).prefixCache(24, null, "x").build());
        assertEquals(ErrorCode.INVALID_CONFIG, notBlocks.code());
        assertTrue(notBlocks.getMessage().contains("24 tokens"), notBlocks.getMessage());

        try (KVStore store = KVStores.open("memory:?capacity=16MiB");
             KVStoreConnector conn = KVStoreConnector.builder(store, WEIGHTS.config().kvLayout())
                     .modelId(WEIGHTS.config().modelId()).chunkTokens(32).dropMode(DropMode.RETAIN).build()) {
            KVException consumer = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.CONSUMER, conn).prefixCache(32, null, "x").build());
            assertTrue(consumer.getMessage().contains("loads its prompts from the store"), consumer.getMessage());
            KVException chunk = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.PRODUCER, conn).sharePrefixes(true).prefixCache(16, null, "x").build());
            assertTrue(chunk.getMessage().contains("16 tokens differ from the connector's 32"), chunk.getMessage());
            KVException hidden = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.PRODUCER, conn).prefixCache(32, null, "x").build());
            assertTrue(hidden.getMessage().contains("hidden states"), hidden.getMessage());
        }
    }
}
