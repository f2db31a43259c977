package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every {@link KVStore} must show. A backend proves itself by extending this class and implementing
 * {@link #openStore()}; the suite opens a fresh store per test and closes it after. Keys carry a random prefix per
 * test, so stores backed by a long-running server need no cleaning between tests.
 */
public abstract class KVStoreContract {
    /** The store under test. */
    protected KVStore store;
    /** Memory for the test's values, freed after each test. */
    protected Arena arena;
    private String prefix;

    /** Opens a new store for one test. */
    protected abstract KVStore openStore();

    /** The size of the large-value test, in bytes; override for slow stores. */
    protected long largeValueBytes() {
        return 8L << 20;
    }

    /** Whether a put on an existing key replaces the value (true for every store kvconnector ships). */
    protected boolean putReplaces() {
        return true;
    }

    @BeforeEach
    void openStoreForTest() {
        arena = Arena.ofShared();
        store = openStore();
        prefix = "kvct:" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void closeStoreAfterTest() {
        store.close();
        arena.close();
    }

    /** A key unique to this test. */
    protected String key(String name) {
        return prefix + name;
    }

    @Test
    void putThenGetIntoCopiesExactBytesAndReturnsSize() {
        MemorySegment v = Segments.random(arena, 10_000, 1);
        assertTrue(store.put(key("a"), v, PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(16_384);
        long r = store.getInto(key("a"), dst);
        assertEquals(10_000, r, GetResult.describe(r));
        assertTrue(Segments.equal(v, dst, 10_000));
    }

    @Test
    void getIntoReturnsMissForAbsentKey() {
        long r = store.getInto(key("never-put"), arena.allocate(64));
        assertTrue(GetResult.isMiss(r), GetResult.describe(r));
        assertEquals(-1, store.size(key("never-put")));
        assertFalse(store.exists(key("never-put")));
    }

    @Test
    void getIntoReturnsTooSmallWithRealSizeAndCopiesNothing() {
        store.put(key("big"), Segments.random(arena, 5000, 2), PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(4999);
        dst.fill((byte) 0x5A);
        long r = store.getInto(key("big"), dst);
        assertTrue(GetResult.isTooSmall(r), GetResult.describe(r));
        assertEquals(5000, GetResult.requiredSize(r));
        for (long i = 0; i < dst.byteSize(); i++) {
            assertEquals((byte) 0x5A, dst.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " was overwritten");
        }
        assertEquals(5000, store.getInto(key("big"), arena.allocate(5000)));
    }

    @Test
    void putReplacesAnExistingValue() {
        assumeTrue(putReplaces(), "this store keeps the first value");
        store.put(key("r"), Segments.random(arena, 100, 3), PutOptions.DEFAULT);
        MemorySegment second = Segments.random(arena, 70, 4);
        assertTrue(store.put(key("r"), second, PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(100);
        assertEquals(70, store.getInto(key("r"), dst));
        assertTrue(Segments.equal(second, dst, 70));
    }

    @Test
    void ifAbsentPutKeepsTheExistingValueAndReturnsFalse() {
        MemorySegment first = Segments.random(arena, 64, 5);
        assertTrue(store.put(key("once"), first, PutOptions.DEFAULT.withIfAbsent(true)));
        assertFalse(store.put(key("once"), Segments.random(arena, 64, 6), PutOptions.DEFAULT.withIfAbsent(true)));
        MemorySegment dst = arena.allocate(64);
        assertEquals(64, store.getInto(key("once"), dst));
        assertTrue(Segments.equal(first, dst, 64));
    }

    @Test
    void sizeAndExistsReflectPresence() {
        store.put(key("s"), Segments.random(arena, 1234, 7), PutOptions.DEFAULT);
        assertEquals(1234, store.size(key("s")));
        assertTrue(store.exists(key("s")));
    }

    @Test
    void removeReturnsWhetherTheKeyExisted() {
        store.put(key("rm"), Segments.random(arena, 10, 8), PutOptions.DEFAULT);
        assertTrue(store.remove(key("rm")));
        assertFalse(store.exists(key("rm")));
        assertTrue(GetResult.isMiss(store.getInto(key("rm"), arena.allocate(10))));
        assertFalse(store.remove(key("rm")));
    }

    @Test
    void emptyValueRoundTrips() {
        assertTrue(store.put(key("empty"), arena.allocate(0), PutOptions.DEFAULT));
        assertEquals(0, store.size(key("empty")));
        assertEquals(0, store.getInto(key("empty"), arena.allocate(8)));
    }

    @Test
    void largeValueRoundTrips() {
        long n = largeValueBytes();
        MemorySegment v = Segments.random(arena, n, 9);
        store.put(key("large"), v, PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(n);
        assertEquals(n, store.getInto(key("large"), dst));
        assertTrue(Segments.equal(v, dst, n));
    }

    @Test
    void keysWithPunctuationAndUnicodeAreDistinct() {
        String[] names = {"{tag}:L0", "a b", "model@1@0@abc", "路径/键", "x:y:z"};
        for (int i = 0; i < names.length; i++) {
            store.put(key(names[i]), Segments.random(arena, 16 + i, 100 + i), PutOptions.DEFAULT);
        }
        for (int i = 0; i < names.length; i++) {
            assertEquals(16 + i, store.size(key(names[i])), names[i]);
        }
    }

    @Test
    void ttlExpiresEntries() throws InterruptedException {
        assumeTrue(store.capabilities().contains(StoreCapability.NATIVE_TTL), "store has no TTL");
        store.put(key("ttl"), Segments.random(arena, 32, 10), PutOptions.DEFAULT.withTtlMillis(150));
        store.put(key("keep"), Segments.random(arena, 32, 11), PutOptions.DEFAULT);
        assertTrue(store.exists(key("ttl")));
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (store.exists(key("ttl")) && System.nanoTime() < deadline) {
            Thread.sleep(25);
        }
        assertFalse(store.exists(key("ttl")), "entry outlived its 150 ms TTL by 5 s");
        assertTrue(GetResult.isMiss(store.getInto(key("ttl"), arena.allocate(32))));
        assertTrue(store.exists(key("keep")));
    }

    @Test
    void batchPutGetAndRemoveHandleEveryKey() {
        int n = 6;
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        MemorySegment[] dsts = new MemorySegment[n];
        for (int i = 0; i < n; i++) {
            keys[i] = key("b" + i);
            values[i] = Segments.random(arena, 100 * (i + 1), 20 + i);
            dsts[i] = arena.allocate(100 * (i + 1));
        }
        boolean[] stored = new boolean[n];
        store.putBatch(keys, values, n, PutOptions.DEFAULT, stored);
        for (boolean s : stored) {
            assertTrue(s);
        }
        keys[n - 1] = key("absent");
        long[] results = new long[n];
        store.getIntoBatch(keys, dsts, n, results);
        for (int i = 0; i < n - 1; i++) {
            assertEquals(100L * (i + 1), results[i]);
            assertTrue(Segments.equal(values[i], dsts[i], results[i]));
        }
        assertTrue(GetResult.isMiss(results[n - 1]));
        assertEquals(n - 1, store.removeBatch(keys, n));
        assertFalse(store.exists(keys[0]));
    }

    @Test
    void concurrentWritersAndReadersSeeOnlyWholeValues() throws Exception {
        int threads = 4;
        int keys = 8;
        long size = 64 * 1024;
        AtomicLong reads = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                fs.add(pool.submit(() -> {
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment v = a.allocate(size);
                        MemorySegment dst = a.allocate(size);
                        for (int i = 0; i < 60; i++) {
                            String k = key("c" + ThreadLocalRandom.current().nextInt(keys));
                            if ((i + id) % 2 == 0) {
                                long seed = ThreadLocalRandom.current().nextLong();
                                Segments.fill(v, seed);
                                v.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed);
                                store.put(k, v, PutOptions.DEFAULT);
                            } else {
                                long r = store.getInto(k, dst);
                                if (GetResult.isHit(r)) {
                                    assertEquals(size, r);
                                    long seed = dst.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                                    Segments.fill(v, seed);
                                    v.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed);
                                    assertTrue(Segments.equal(v, dst, size), "torn read of " + k);
                                    reads.incrementAndGet();
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(reads.get() > 0, "no read hit a value");
    }

    @Test
    void closedStoreRejectsCallsWithClosedError() {
        store.close();
        store.close();
        MemorySegment v = arena.allocate(8);
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.put(key("x"), v,
                PutOptions.DEFAULT)).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.getInto(key("x"), v)).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.size(key("x"))).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.remove(key("x"))).code());
    }

    @Test
    void healthCheckDescribesTheStore() {
        assertFalse(store.healthCheck().isBlank());
    }
}
