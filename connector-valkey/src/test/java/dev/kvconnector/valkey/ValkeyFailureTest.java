package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Servers that die, stall or fill up, and the errors and recovery the store gives. Each test owns its server. */
class ValkeyFailureTest {
    private static final long BIG = 64L << 20;

    @Test
    void serverKilledDuringA64MebibyteSetFailsClearlyAndTheNextCallSucceedsAfterRestart() throws Exception {
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?timeout=20s&pool=1");
             Arena arena = Arena.ofShared()) {
            MemorySegment v = Segments.random(arena, BIG, '*', 1);
            assertTrue(store.put("small", v.asSlice(0, 10), PutOptions.DEFAULT), "connected before the pause");
            // Paused, the server stops reading, so the SET is certainly mid-transfer when the kill lands.
            server.pause();
            CompletableFuture<Boolean> put = CompletableFuture.supplyAsync(
                    () -> store.put("big", v, PutOptions.DEFAULT));
            Thread.sleep(300);
            assertTrue(!put.isDone(), "the SET must still be in flight");
            server.kill();
            KVException e = unwrap(put);
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("put"), e.getMessage());
            server.restart();
            try {
                assertTrue(store.put("big", v, PutOptions.DEFAULT));
            } catch (KVException again) {
                fail("after restart: " + again + "\nserver log:\n" + server.log());
            }
            MemorySegment dst = Segments.zeroed(arena, BIG);
            assertEquals(BIG, store.getInto("big", dst));
            assertEquals(-1, Segments.mismatch(v, dst, BIG));
        }
    }

    @Test
    void serverKilledDuring64MebibyteGetsFailsClearlyAndTheNextCallSucceedsAfterRestart() throws Exception {
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?timeout=20s&pool=2");
             Arena arena = Arena.ofShared()) {
            MemorySegment v = Segments.random(arena, BIG, '%', 2);
            MemorySegment dst = Segments.zeroed(arena, BIG);
            assertTrue(store.put("big", v, PutOptions.DEFAULT));
            // GETs back to back: transfers dominate the loop, so the kill lands mid-reply nearly always, and in
            // any case the call in flight must end with a clear error and no hang.
            CompletableFuture<Integer> gets = CompletableFuture.supplyAsync(() -> {
                int n = 0;
                while (true) {
                    assertEquals(BIG, store.getInto("big", dst));
                    n++;
                }
            });
            Thread.sleep(500);
            server.kill();
            KVException e = unwrap(gets);
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
            server.restart();
            assertEquals(GetResult.MISS, store.getInto("big", dst), "a restarted server without persistence is empty");
            assertTrue(store.put("after", v.asSlice(0, 10), PutOptions.DEFAULT));
        }
    }

    @Test
    void serverKilledBetweenAPipelinedReadAndItsAwaitFailsTheAwaitClearlyAndTheNextCallReconnects()
            throws Exception {
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?timeout=20s&pool=1");
             Arena arena = Arena.ofShared()) {
            MemorySegment v = Segments.random(arena, 1 << 20, '#', 3);
            assertTrue(store.put("layer", v, PutOptions.DEFAULT));
            StoreRead read = store.newRead();
            MemorySegment[] dsts = {Segments.zeroed(arena, 1 << 20)};
            // Paused, the server answers nothing, so the kill lands before any reply byte.
            server.pause();
            store.sendGetIntoBatch(new String[] {"layer"}, dsts, 1, read);
            server.kill();

            KVException e = assertThrows(KVException.class, () -> read.await(new long[1]));

            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("layer"), e.getMessage());
            assertTrue(!read.isPending(), "a failed await leaves the handle free");
            server.restart();
            assertEquals(GetResult.MISS, store.getInto("layer", dsts[0]), "the pool's one connection was replaced");
        }
    }

    @Test
    void pausedServerMakesTheCallTimeOutAndTheConnectionIsReplaced() {
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?timeout=400ms&pool=1");
             Arena arena = Arena.ofShared()) {
            assertTrue(store.put("k", Segments.random(arena, 100, 1, 1), PutOptions.DEFAULT));
            server.pause();
            try {
                long start = System.nanoTime();
                KVException e = assertTimeoutPreemptively(Duration.ofSeconds(10),
                        () -> assertThrows(KVException.class, () -> store.getInto("k", Segments.zeroed(arena, 100))));
                long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
                assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("400 ms"),
                        e.getMessage());
                assertTrue(tookMillis >= 350, "timed out after " + tookMillis + " ms");
            } finally {
                server.resume();
            }
            assertEquals(100, store.getInto("k", Segments.zeroed(arena, 100)));
        }
    }

    @Test
    void fullServerWithNoevictionIsStoreFullNamingThePolicy() {
        try (RedisServerProcess server = RedisServerProcess.start("--maxmemory", "2mb", "--maxmemory-policy",
                "noeviction");
             KVStore store = KVStores.open("valkey://" + server.hostPort());
             Arena arena = Arena.ofConfined()) {
            MemorySegment v = Segments.random(arena, 256 * 1024, 1, 1);
            for (int i = 0; i < 64; i++) {
                try {
                    store.put("fill:" + i, v, PutOptions.DEFAULT);
                } catch (KVException e) {
                    assertEquals(ErrorCode.STORE_FULL, e.code(), e.getMessage());
                    assertTrue(e.getMessage().contains("noeviction") && e.getMessage().contains(server.hostPort()),
                            e.getMessage());
                    assertEquals("fill:" + i, e.key());
                    assertTrue(store.remove("fill:0"), "the connection stays usable after an OOM reply");
                    return;
                }
            }
            fail("64 puts of 256 KiB into a 2 MiB server never failed");
        }
    }

    @Test
    void closedPortIsStoreUnreachableNamingHostAndPort() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        int p = port;
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:" + p + "?connect-timeout=500ms"));
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("127.0.0.1:" + p), e.getMessage());
    }

    @Test
    void unknownOptionIsInvalidUri() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:1?timeuot=5s"));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("timeuot"), e.getMessage());
    }

    @Test
    void badProtocolAndDatabaseOptionsAreInvalidUri() {
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:1?protocol=4")).code());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:1/abc")).code());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:1?pool=0")).code());
    }

    private static KVException unwrap(CompletableFuture<?> f) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof KVException kv) {
                return kv;
            }
            throw e;
        }
        throw new AssertionError("the call did not fail");
    }
}
