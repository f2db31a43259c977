package dev.kvconnector.lmcache.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Pipelined batches of the lm:// store against the Java server. */
class LmStoreBatchTest {
    private static MemorySegment filled(Arena arena, int n, int seed) {
        MemorySegment s = arena.allocate(n);
        for (int i = 0; i < n; i++) {
            s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + seed));
        }
        return s;
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void batchesLargerThanOneWindowKeepEveryResultInOrder(LmProtocolVersion v) {
        int n = 600;
        try (LmCacheServer server = LmCacheServer.builder().protocol(v).capacityBytes(64L << 20).build().start();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?pool=1&protocol="
                     + v.label());
             Arena arena = Arena.ofConfined()) {
            String[] keys = new String[n];
            MemorySegment[] values = new MemorySegment[n];
            MemorySegment[] dsts = new MemorySegment[n];
            for (int i = 0; i < n; i++) {
                keys[i] = "k" + i;
                values[i] = filled(arena, 10 + i, i);
                dsts[i] = arena.allocate(i % 50 == 7 ? 5 : 10 + i);
            }
            boolean[] stored = new boolean[n];
            store.putBatch(keys, values, n - 100, PutOptions.DEFAULT, stored);
            for (int i = 0; i < n - 100; i++) {
                assertTrue(stored[i], "key " + i);
            }
            long[] results = new long[n];
            store.getIntoBatch(keys, dsts, n, results);
            for (int i = 0; i < n; i++) {
                if (i >= n - 100) {
                    assertTrue(GetResult.isMiss(results[i]), i + ": " + GetResult.describe(results[i]));
                } else if (i % 50 == 7) {
                    assertEquals(GetResult.tooSmall(10 + i), results[i], "key " + i);
                } else {
                    assertEquals(10 + i, results[i], "key " + i);
                    assertEquals(-1, dsts[i].mismatch(values[i]), "key " + i);
                }
            }
            assertEquals(1, server.connectionCount());
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void aTooSmallDestinationForALargeValueInsideABatchIsDrainedNotAbandoned(LmProtocolVersion v) {
        try (LmCacheServer server = LmCacheServer.builder().protocol(v).capacityBytes(64L << 20).build().start();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?pool=1&protocol="
                     + v.label());
             Arena arena = Arena.ofConfined()) {
            MemorySegment big = filled(arena, 9 << 20, 1);
            MemorySegment small = filled(arena, 100, 2);
            store.put("big", big, PutOptions.DEFAULT);
            store.put("small", small, PutOptions.DEFAULT);
            long[] results = new long[2];
            MemorySegment dst = arena.allocate(100);
            store.getIntoBatch(new String[] {"big", "small"}, new MemorySegment[] {arena.allocate(16), dst}, 2,
                    results);
            assertEquals(GetResult.tooSmall(9 << 20), results[0]);
            assertEquals(100, results[1]);
            assertEquals(-1, dst.mismatch(small));
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void aBadKeyInsideABatchLeavesNoUnreadRepliesOnAPooledConnection(LmProtocolVersion v) {
        try (LmCacheServer server = LmCacheServer.builder().protocol(v).build().start();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?pool=1&protocol="
                     + v.label());
             Arena arena = Arena.ofConfined()) {
            MemorySegment value = filled(arena, 64, 3);
            store.put("a", value, PutOptions.DEFAULT);
            long[] results = new long[2];
            KVException e = assertThrows(KVException.class, () -> store.getIntoBatch(
                    new String[] {"a", "x".repeat(151)}, new MemorySegment[] {arena.allocate(64), arena.allocate(64)},
                    2, results));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            MemorySegment dst = arena.allocate(64);
            assertTrue(store.exists("a"));
            assertEquals(64, store.getInto("a", dst));
            assertEquals(-1, dst.mismatch(value));
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void aBatchValueTheServerCannotKeepIsStoreFullAndTheOthersAreStored(LmProtocolVersion v) {
        try (LmCacheServer server = LmCacheServer.builder().protocol(v).capacityBytes(1000).build().start();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?protocol=" + v.label());
             Arena arena = Arena.ofConfined()) {
            String[] keys = {"a", "too-big", "c"};
            MemorySegment[] values = {filled(arena, 100, 0), filled(arena, 1001, 0), filled(arena, 100, 0)};
            boolean[] stored = new boolean[3];
            KVException e = assertThrows(KVException.class,
                    () -> store.putBatch(keys, values, 3, PutOptions.DEFAULT, stored));
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertEquals("too-big", e.key());
            assertTrue(stored[0] && stored[2]);
            assertFalse(stored[1]);
            assertTrue(store.exists("c"));
        }
    }
}
