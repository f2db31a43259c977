package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The hot path allocates nothing on the Java heap once warm: headers and keys go through reused buffers, values
 * move between the socket and the caller's segments through cached views, each in its own single-buffer write or
 * read (the JDK's gather write would allocate a 40-byte releaser per segment-backed buffer per call). This is a
 * property of the code (a regression shows up as GC pressure in the engine), not a timing.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValkeySteadyStateAllocationTest {
    private final com.sun.management.ThreadMXBean mx =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private RedisServerProcess server;
    private KVStore store;

    @BeforeAll
    void start() {
        server = RedisServerProcess.start();
        store = KVStores.open("valkey://" + server.hostPort() + "?pool=1");
    }

    @AfterAll
    void stop() {
        try {
            if (store != null) {
                store.close();
            }
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }

    /** Bytes allocated by this thread per call of {@code r}, after a warm-up. */
    private long bytesPerCall(Runnable r) {
        long tid = Thread.currentThread().threadId();
        for (int i = 0; i < 3000; i++) {
            r.run();
        }
        // The best of 5 windows: a one-off (a recompilation, a connection the watchdog replaced under load) lands in
        // one window, an allocation per call in every one.
        int n = 500;
        long best = Long.MAX_VALUE;
        for (int window = 0; window < 5; window++) {
            long before = mx.getThreadAllocatedBytes(tid);
            for (int i = 0; i < n; i++) {
                r.run();
            }
            best = Math.min(best, (mx.getThreadAllocatedBytes(tid) - before) / n);
        }
        return best;
    }

    @Test
    void getsSizeRemoveSmallPutsAndPipelinedReadsAllocateNothingOnceWarm() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment small = Segments.random(arena, 100, 1, 1);
            MemorySegment big = Segments.random(arena, 256 * 1024, '*', 2);
            MemorySegment dst = Segments.zeroed(arena, 256 * 1024);
            store.put("alloc:big", big, PutOptions.DEFAULT);
            PutOptions ttl = PutOptions.DEFAULT.withTtlMillis(60_000);
            String[] keys = {"alloc:big", "alloc:small", "alloc:none"};
            MemorySegment[] dsts = {dst, Segments.zeroed(arena, 100), Segments.zeroed(arena, 8)};
            long[] results = new long[3];
            StoreRead read = store.newRead();
            long[] readResults = new long[3];
            long perCall = bytesPerCall(() -> {
                store.put("alloc:small", small, ttl);
                store.getInto("alloc:small", dst);
                store.getInto("alloc:big", dst);
                store.size("alloc:big");
                store.remove("alloc:gone");
                store.getIntoBatch(keys, dsts, 3, results);
                store.sendGetIntoBatch(keys, dsts, 3, read);
                read.await(readResults);
            });
            assertEquals(256 * 1024, results[0]);
            assertEquals(256 * 1024, readResults[0]);
            // Under 8 bytes per round on average: no object per call, while a rare one-off (a deoptimization)
            // cannot fail the test.
            assertTrue(perCall < 8, perCall + " bytes allocated per round of 8 calls");
        }
    }

    @Test
    void largePutsAndBatchesAllocateNothingOnceWarm() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] values = {Segments.random(arena, 256 * 1024, '$', 3),
                    Segments.random(arena, 64 * 1024, '%', 4), Segments.random(arena, 100_000, '>', 5)};
            String[] keys = {"alloc:l0", "alloc:l1", "alloc:l2"};
            boolean[] stored = new boolean[3];
            long perCall = bytesPerCall(() -> {
                store.put("alloc:one", values[0], PutOptions.DEFAULT);
                store.putBatch(keys, values, 3, PutOptions.DEFAULT, stored);
            });
            assertTrue(stored[2]);
            assertTrue(perCall < 8, perCall + " bytes allocated per round of 4 large values");
        }
    }

    @Test
    void theWatchdogAllocatesNothingWhileItWaits() throws InterruptedException {
        Thread watchdog = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("kvc-resp-watchdog-" + server.hostPort())).findFirst()
                .orElseThrow();
        Thread.sleep(300);
        long before = mx.getThreadAllocatedBytes(watchdog.threadId());
        // 10 ticks of 100 ms; Thread.sleep in its loop allocated about 40 bytes per tick.
        Thread.sleep(1000);
        long after = mx.getThreadAllocatedBytes(watchdog.threadId());
        assertEquals(0, after - before, "bytes the idle watchdog allocated in 1 s");
    }
}
