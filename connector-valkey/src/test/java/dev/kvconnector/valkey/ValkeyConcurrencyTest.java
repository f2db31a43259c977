package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Many threads over a small pool: every thread sees its own bytes, and nothing leaks between callers. */
class ValkeyConcurrencyTest {
    @Test
    void manyThreadsOverASmallPoolEachReadBackTheirOwnValues() throws Exception {
        int threads = 16;
        int rounds = 40;
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?pool=4&timeout=30s")) {
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                CountDownLatch go = new CountDownLatch(1);
                List<Future<Integer>> results = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int id = t;
                    results.add(pool.submit(() -> {
                        go.await();
                        int checked = 0;
                        try (Arena arena = Arena.ofConfined()) {
                            for (int r = 0; r < rounds; r++) {
                                long size = 1 + (id * 7919L + r * 104729L) % (200 * 1024);
                                MemorySegment v = Segments.random(arena, size, "+-:$*%_,#!=(|~>".charAt(r % 15),
                                        id * 1000L + r);
                                String k = "t" + id + ":r" + r;
                                if (r % 3 == 0) {
                                    String[] keys = {k, k + ":b"};
                                    boolean[] stored = new boolean[2];
                                    store.putBatch(keys, new MemorySegment[] {v, v}, 2, PutOptions.DEFAULT, stored);
                                    assertTrue(stored[0] && stored[1]);
                                } else {
                                    assertTrue(store.put(k, v, PutOptions.DEFAULT));
                                }
                                MemorySegment dst = Segments.zeroed(arena, size);
                                assertEquals(size, store.getInto(k, dst));
                                assertEquals(-1, Segments.mismatch(v, dst, size), "thread " + id + " round " + r);
                                assertEquals(size, store.size(k));
                                assertTrue(store.remove(k));
                                checked++;
                            }
                        }
                        return checked;
                    }));
                }
                go.countDown();
                for (Future<Integer> f : results) {
                    assertEquals(rounds, f.get(120, TimeUnit.SECONDS));
                }
            } finally {
                pool.shutdownNow();
                assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void callersBeyondThePoolWaitAndThenTimeOut() throws Exception {
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?pool=1&timeout=300ms");
             Arena arena = Arena.ofShared()) {
            assertTrue(store.put("k", Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT));
            server.pause();
            try {
                Thread holder = Thread.ofPlatform().start(() -> {
                    try {
                        store.getInto("k", Segments.zeroed(arena, 10));
                    } catch (KVException expected) {
                        // The paused server times this call out; the test is about the second caller.
                    }
                });
                Thread.sleep(50);
                KVException e = org.junit.jupiter.api.Assertions.assertThrows(KVException.class,
                        () -> store.getInto("k", Segments.zeroed(arena, 10)));
                assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
                holder.join(10_000);
            } finally {
                server.resume();
            }
        }
    }
}
