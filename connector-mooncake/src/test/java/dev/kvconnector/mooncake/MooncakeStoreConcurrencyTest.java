package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Many threads on one store handle: no torn values, no lost staging slots, and a close that waits. */
class MooncakeStoreConcurrencyTest {
    private static final int THREADS = 8;

    private static void fill(MemorySegment s, int n, long seed) {
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed * 31 + i));
        }
    }

    private static boolean matches(MemorySegment s, int n, long seed) {
        for (int i = 0; i < n; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed * 31 + i)) {
                return false;
            }
        }
        return true;
    }

    @Test
    void concurrentPutsGetsAndRemovesFromManyThreadsKeepEveryValueIntact() throws Exception {
        MooncakeTestTarget target = MooncakeTestTarget.require();
        String prefix = MooncakeTestTarget.uniquePrefix();
        // More threads than staging slots, so threads wait for slots; force keeps each thread's own leases short.
        try (MooncakeStore store = target.open("&staging-slots=4&lease-policy=force")) {
            String sharedKey = prefix + "shared";
            int sharedSize = 4096;
            try (Arena a = Arena.ofConfined()) {
                MemorySegment v = a.allocate(sharedSize);
                fill(v, sharedSize, 99);
                assertTrue(store.put(sharedKey, v, PutOptions.DEFAULT));
            }
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            CountDownLatch start = new CountDownLatch(1);
            AtomicLong ops = new AtomicLong();
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                int thread = t;
                futures.add(pool.submit(() -> {
                    start.await();
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment value = a.allocate(64 * 1024);
                        MemorySegment dst = a.allocate(64 * 1024);
                        MemorySegment shared = a.allocate(sharedSize);
                        for (int i = 0; i < 150; i++) {
                            String key = prefix + thread + "-" + (i % 10);
                            int n = 1 + (thread * 7919 + i * 104729) % (64 * 1024);
                            long seed = thread * 1000L + i;
                            fill(value, n, seed);
                            assertTrue(store.put(key, value.asSlice(0, n), PutOptions.DEFAULT));
                            assertEquals(n, store.getInto(key, dst), key);
                            assertTrue(matches(dst, n, seed), "torn value under " + key);
                            assertEquals(sharedSize, store.getInto(sharedKey, shared));
                            assertTrue(matches(shared, sharedSize, 99), "torn shared value");
                            if (i % 3 == 0) {
                                assertTrue(store.remove(key));
                                assertTrue(GetResult.isMiss(store.getInto(key, dst)));
                            }
                            ops.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : futures) {
                f.get(120, TimeUnit.SECONDS);
            }
            pool.shutdown();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
            assertEquals(THREADS * 150L, ops.get());
            assertEquals(store.config().stagingSlots(), store.freeStagingSlots(), "staging slots leaked");
            store.removeMatching("^" + prefix);
        }
    }

    @Test
    void closeWaitsForCallsInFlightAndLaterCallsFailWithClosed() throws Exception {
        MooncakeTestTarget target = MooncakeTestTarget.require();
        String prefix = MooncakeTestTarget.uniquePrefix();
        String master = target.freshMaster();
        MooncakeStore store = target.open(master, "&lease-policy=force");
        AtomicLong closedSeen = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<?>> futures = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            int thread = t;
            futures.add(pool.submit(() -> {
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment v = a.allocate(8192);
                    for (int i = 0; ; i++) {
                        try {
                            store.put(prefix + thread + "-" + (i % 4), v, PutOptions.DEFAULT);
                            store.getInto(prefix + thread + "-" + (i % 4), v);
                        } catch (KVException e) {
                            assertEquals(ErrorCode.CLOSED, e.code(), e.getMessage());
                            closedSeen.incrementAndGet();
                            return null;
                        }
                    }
                }
            }));
        }
        Thread.sleep(200);
        store.close();
        for (Future<?> f : futures) {
            f.get(30, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertEquals(4, closedSeen.get(), "every thread sees the close");
        assertEquals(0, store.callerRegistrations());
        try (MooncakeStore cleaner = target.open(master, "&lease-policy=force")) {
            cleaner.removeMatching("^" + prefix);
        }
    }
}
