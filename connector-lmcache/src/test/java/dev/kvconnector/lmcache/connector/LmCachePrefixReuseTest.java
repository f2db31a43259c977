package dev.kvconnector.lmcache.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.format.LmChunkFormat;
import dev.kvconnector.lmcache.store.MooncakeDouble;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.LeakCheck;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Prefix reuse across two engines, each with its own connector, store client and paged cache, sharing one real
 * store: engine A inserts prompt P1; engine B's prompt P2 shares P1's first whole chunks and then diverges.
 */
@ExtendWith(LeakCheck.class)
class LmCachePrefixReuseTest {
    private static final KVLayout LAYOUT = new KVLayout("llama-tiny", AttentionKind.MHA, 4, 2, 16, DType.BF16, 16,
            64);
    private static final int CHUNK = 32;

    private static int[] tokens(int n, int divergeAt) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = i < divergeAt ? 1000 + i * 7 : 900_000 + i;
        }
        return t;
    }

    private static LmEngine engine(KVStore store) {
        return LmEngine.of(store, LAYOUT, b -> b.modelId("meta-llama/Llama-tiny").chunkTokens(CHUNK)
                .stagingBytes(8L << 20));
    }

    /**
     * P1 has 150 tokens; P2 has 170 and equals P1 for its first {@code shared} tokens. Chunks of 32 tokens: B finds
     * the whole chunks inside the shared part, no more.
     */
    private static void prefixReuse(String uri, int shared) {
        int[] p1 = tokens(150, 150);
        int[] p2 = tokens(170, shared);
        int expected = shared / CHUNK * CHUNK;
        try (KVStore storeA = KVStores.open(uri);
             KVStore storeB = KVStores.open(uri);
             LmEngine a = engine(storeA);
             LmEngine b = engine(storeB);
             PagedEngine engineA = PagedEngine.filled(LAYOUT, 150, 21);
             PagedEngine engineB = PagedEngine.empty(LAYOUT, 170, 22)) {
            assertEquals(5, a.insert(RequestTokens.of(p1), engineA.cache, engineA.blocks), "4 whole chunks and 22");
            RequestTokens q = RequestTokens.of(p2);
            assertEquals(expected, b.lookup(q));
            DropResult r = b.dropSelect(q, engineB.cache, engineB.blocks);
            if (expected == 0) {
                assertEquals(MissReason.ABSENT, r.reason());
                assertTrue(r.detail().contains(b.keys(q).getFirst()), r.detail());
            } else {
                assertEquals(expected, r.matchedTokens(), r.toString());
                assertFalse(r.isComplete());
            }
            assertTrue(engineA.sameKv(engineB, 0, expected), "B's cache holds A's KV, byte for byte");
            assertTrue(engineB.allZero(expected, 170), "nothing beyond the shared whole chunks was written");
            assertEquals(150, b.lookup(RequestTokens.of(p1)), "A's entries are retained for reuse");
        }
    }

    @ParameterizedTest(name = "shared prefix of {0} tokens")
    @ValueSource(ints = {100, 96, 31, 0})
    void overValkeyEngineBFindsExactlyTheSharedWholeChunks(int shared) {
        try (RedisServerProcess redis = RedisServerProcess.start()) {
            prefixReuse("lmcache+valkey://" + redis.hostPort(), shared);
            assertEquals("*5", redis.command("KEYS", "*kv_bytes"), "A's five chunks, in LMCache's two-key layout");
            assertEquals("*5", redis.command("KEYS", "*metadata"));
        }
    }

    @Test
    void overValkeyLegacyLayoutToo() {
        try (RedisServerProcess redis = RedisServerProcess.start()) {
            prefixReuse("lmcache+valkey://" + redis.hostPort() + "?layout=valkey-legacy", 64);
        }
    }

    @Test
    void the2024FormatsAreRefusedOverTheV1Layouts() {
        try (KVStore store = KVStores.open(MooncakeDouble.uri("lmcache+mooncake", MooncakeDouble.freshMaster()))) {
            KVException e = assertThrows(KVException.class, () -> LmCacheConnectors.builder(store, LAYOUT)
                    .modelId("m").format(LmChunkFormat.V0_VLLM).build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("RemoteMetadata"), e.getMessage());
        }
    }

    @Test
    void overMooncake() {
        prefixReuse(MooncakeDouble.uri("lmcache+mooncake", MooncakeDouble.freshMaster()), 70);
    }
}
