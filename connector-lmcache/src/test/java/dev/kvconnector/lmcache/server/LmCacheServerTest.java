package dev.kvconnector.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class LmCacheServerTest {
    private final List<LmCacheServer> servers = new ArrayList<>();

    private LmCacheServer start(LmProtocolVersion version, long capacity) {
        LmCacheServer s = LmCacheServer.builder().protocol(version).capacityBytes(capacity).build().start();
        servers.add(s);
        return s;
    }

    @AfterEach
    void stopServersAndCheckForLeaks() {
        for (LmCacheServer s : servers) {
            s.stop();
            assertEquals(0, s.nativeBytesInUse(), "native bytes left after stop");
            assertEquals(0, s.connectionCount(), "connections left after stop");
        }
    }

    private static byte[] bytes(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        return b;
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void putLargerThanCapacityIsDroppedAndTheConnectionStaysUsable(LmProtocolVersion v) throws Exception {
        LmCacheServer server = start(v, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), v)) {
            c.put("kept", bytes(300, 3));
            c.put("big", bytes(2000, 1));
            assertEquals(LmWire.SUCCESS, c.exist("kept"), "a value that cannot fit must not evict others");
            assertEquals(LmWire.FAIL, c.exist("big"));
            c.put("small", bytes(500, 2));
            assertEquals(LmWire.SUCCESS, c.exist("small"));
        }
        assertEquals(800, server.storedBytes());
        assertEquals(800, server.nativeBytesInUse());
    }

    @Test
    void leastRecentlyUsedEntryIsEvictedFirst() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 3000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("a", bytes(1000, 1));
            c.put("b", bytes(1000, 2));
            c.put("c", bytes(1000, 3));
            c.send(LmWire.GET, "a");
            assertEquals(1000, c.reply().length());
            assertArrayEquals(bytes(1000, 1), c.payload(1000));
            c.put("d", bytes(1000, 4));
            assertEquals(LmWire.FAIL, c.exist("b"));
            assertEquals(LmWire.SUCCESS, c.exist("a"));
            assertEquals(LmWire.SUCCESS, c.exist("c"));
            assertEquals(LmWire.SUCCESS, c.exist("d"));
        }
        assertEquals(1, server.evictions());
        assertEquals(3000, server.storedBytes());
        assertEquals(3, server.entryCount());
    }

    @Test
    void replacingAKeyFreesTheOldValue() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V1, 1 << 20);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            c.put("k", bytes(1000, 1));
            c.put("k", bytes(500, 2));
            c.send(LmWire.GET, "k");
            LmReplyHeader h = c.reply();
            assertEquals(500, h.length());
            assertEquals(LmObjectMeta.bytes(500), h.meta());
            assertArrayEquals(bytes(500, 2), c.payload(500));
        }
        assertEquals(1, server.entryCount());
        assertEquals(500, server.storedBytes());
        assertEquals(500, server.nativeBytesInUse());
    }

    @Test
    void aReplacedValuesMemoryIsKeptAndReusedByTheNextPutOfItsSize() throws Exception {
        int size = 128 << 10;
        LmCacheServer server = start(LmProtocolVersion.V1, 1 << 20);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            c.put("k", bytes(size, 1));
            c.put("k", bytes(size, 2));
            assertEquals(LmWire.SUCCESS, c.exist("k"));
            assertEquals(size, server.keptBytes(), "the replaced value's memory is kept");
            assertEquals(2L * size, server.nativeBytesInUse());
            c.put("k", bytes(size, 3));
            assertEquals(LmWire.SUCCESS, c.exist("k"));
            assertEquals(2L * size, server.nativeBytesInUse(), "the third PUT must reuse the kept memory");
            assertEquals(size, server.keptBytes());
            c.send(LmWire.GET, "k");
            assertEquals(size, c.reply().length());
            assertArrayEquals(bytes(size, 3), c.payload(size));
            c.put("other", bytes(size + 1, 4));
            assertEquals(LmWire.SUCCESS, c.exist("other"));
            assertEquals(size, server.keptBytes(), "a PUT of another size must not take the kept block");
        }
        assertEquals(2L * size + 1, server.storedBytes());
        assertEquals(3L * size + 1, server.nativeBytesInUse());
    }

    @Test
    void keptMemoryIsDroppedBeforeAnyEntryIsEvicted() throws Exception {
        int size = 128 << 10;
        int capacity = 400 << 10;
        LmCacheServer server = start(LmProtocolVersion.V0, capacity);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("a", bytes(size, 1));
            c.put("a", bytes(size, 2));
            assertEquals(LmWire.SUCCESS, c.exist("a"));
            assertEquals(size, server.keptBytes());
            c.put("b", bytes(200 << 10, 3));
            assertEquals(LmWire.SUCCESS, c.exist("a"), "kept memory must give way before a stored entry");
            assertEquals(LmWire.SUCCESS, c.exist("b"));
        }
        assertEquals(0, server.evictions());
        assertEquals(0, server.keptBytes());
        assertEquals(size + (200 << 10), server.nativeBytesInUse());
    }

    @Test
    void storedInFlightAndKeptMemoryStayWithinTheCapacityOverMixedSizes() throws Exception {
        int capacity = 1 << 20;
        int[] sizes = {64 << 10, 96 << 10, 128 << 10, 200 << 10, 100};
        LmCacheServer server = start(LmProtocolVersion.V1, capacity);
        Map<String, byte[]> latest = new HashMap<>();
        Random random = new Random(7);
        int hits = 0;
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            for (int i = 0; i < 200; i++) {
                String key = "k" + random.nextInt(12);
                byte[] value = bytes(sizes[random.nextInt(sizes.length)], i);
                c.put(key, value);
                latest.put(key, value);
                assertEquals(LmWire.SUCCESS, c.exist(key));
                assertTrue(server.nativeBytesInUse() <= capacity, server.nativeBytesInUse() + " native bytes over "
                        + capacity + " after PUT " + i);
                assertEquals(server.storedBytes() + server.keptBytes(), server.nativeBytesInUse(),
                        "native memory that is neither stored nor kept after PUT " + i);
            }
            assertTrue(server.evictions() > 0, "no eviction under a small capacity");
            for (Map.Entry<String, byte[]> e : latest.entrySet()) {
                c.send(LmWire.GET, e.getKey());
                LmReplyHeader h = c.reply();
                if (h.code() == LmWire.SUCCESS) {
                    assertArrayEquals(e.getValue(), c.payload(h.length()), "value of " + e.getKey());
                    hits++;
                }
            }
        }
        assertTrue(hits > 0, "no key left to read back");
    }

    @Test
    void anEmptyValueIsStoredAndServed() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 100);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("empty", new byte[0]);
            c.send(LmWire.GET, "empty");
            LmReplyHeader h = c.reply();
            assertEquals(LmWire.SUCCESS, h.code());
            assertEquals(0, h.length());
            assertEquals(LmWire.SUCCESS, c.exist("empty"));
        }
    }

    @Test
    void v1ServerAnswersListWithFailAndKeepsTheConnection() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V1, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            c.send(LmWire.LIST, "x");
            LmReplyHeader h = c.reply();
            assertEquals(LmWire.FAIL, h.code());
            assertEquals(0, h.length());
            assertEquals(LmWire.FAIL, c.exist("x"));
        }
    }

    @Test
    void v0ServerAnswersHealthWithFailAndV1WithSuccess() throws Exception {
        LmCacheServer v0 = start(LmProtocolVersion.V0, 1000);
        LmCacheServer v1 = start(LmProtocolVersion.V1, 1000);
        try (RawLmClient c0 = new RawLmClient(v0.boundPort(), LmProtocolVersion.V0);
             RawLmClient c1 = new RawLmClient(v1.boundPort(), LmProtocolVersion.V1)) {
            c0.send(LmWire.HEALTH, "x");
            assertEquals(LmWire.FAIL, c0.reply().code());
            c1.send(LmWire.HEALTH, "x");
            assertEquals(LmWire.SUCCESS, c1.reply().code());
        }
    }

    @Test
    void v0ServerListsItsKeysJoinedByNewlines() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("one", bytes(3, 0));
            c.put("twö", bytes(3, 0));
            c.send(LmWire.LIST, "x");
            LmReplyHeader h = c.reply();
            assertEquals(LmWire.SUCCESS, h.code());
            assertEquals("one\ntwö", new String(c.payload(h.length()), java.nio.charset.StandardCharsets.UTF_8));
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void unknownCommandClosesTheConnection(LmProtocolVersion v) throws Exception {
        LmCacheServer server = start(v, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), v)) {
            c.send(99, "x");
            assertTrue(c.closedByServer());
        }
    }

    @Test
    void negativePutLengthClosesTheConnection() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.send(LmWire.PUT, "x", -5, LmObjectMeta.NONE);
            assertTrue(c.closedByServer());
        }
        assertEquals(0, server.entryCount());
    }

    @Test
    void aKeyFieldThatIsNotUtf8ClosesTheConnection() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 1000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            byte[] frame = new byte[158];
            frame[0] = LmWire.EXIST;
            java.util.Arrays.fill(frame, 8, 158, (byte) 0xC3);
            c.write(frame);
            assertTrue(c.closedByServer());
        }
    }

    @Test
    void clientDyingMidPutLeavesNoEntryAndGivesBackItsReservation() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V0, 10_000);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.send(LmWire.PUT, "half", 10_000, LmObjectMeta.NONE);
            c.write(bytes(100, 0));
            await(() -> server.nativeBytesInUse() == 10_000, "the server to allocate the value");
        }
        await(() -> server.connectionCount() == 0 && server.nativeBytesInUse() == 0,
                "the server to drop the connection and free the half-received value");
        assertEquals(0, server.entryCount());
        assertEquals(0, server.nativeBytesInUse());
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("whole", bytes(10_000, 0));
            assertEquals(LmWire.SUCCESS, c.exist("whole"));
        }
    }

    @Test
    void aStalledPutGivesBackItsReservationAtThePayloadTimeoutAndAnotherClientsPutSucceeds() throws Exception {
        int capacity = 64 << 20;
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).capacityBytes(capacity)
                .payloadTimeoutMillis(1_500).build().start();
        servers.add(server);
        try (CapturedStderr log = new CapturedStderr();
             RawLmClient stalled = new RawLmClient(server.boundPort(), LmProtocolVersion.V1);
             RawLmClient other = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            stalled.send(LmWire.PUT, "stalled-key", 62 << 20, LmObjectMeta.bytes(62 << 20));
            await(() -> server.nativeBytesInUse() == 62 << 20, "the server to reserve the stalled PUT");
            other.put("early", bytes(4 << 20, 1));
            assertEquals(LmWire.FAIL, other.exist("early"), "no room beside the stalled reservation yet");
            assertTrue(log.text().contains("reserved by PUTs still receiving their payload"), log.text());
            assertTrue(stalled.closedByServer(), "the watchdog closes the stalled connection");
            await(() -> server.connectionCount() == 1 && server.nativeBytesInUse() == server.keptBytes(),
                    "the stalled reservation to be given back");
            other.put("late", bytes(4 << 20, 2));
            assertEquals(LmWire.SUCCESS, other.exist("late"));
            assertEquals(1, server.entryCount());
            String stalledClient = "127.0.0.1:" + stalled.localPort();
            await(() -> log.text().contains(stalledClient), "the log to name the stalled client");
            String line = log.text().lines().filter(l -> l.contains(stalledClient)).findFirst().orElseThrow();
            assertTrue(line.contains("stalled-key") && line.contains("no progress for 1500 ms"), line);
        }
    }

    @Test
    void aClientThatStopsReadingAGetReplyIsClosedAtThePayloadTimeout() throws Exception {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V0).capacityBytes(64 << 20)
                .payloadTimeoutMillis(300).build().start();
        servers.add(server);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("big", bytes(32 << 20, 3));
            assertEquals(LmWire.SUCCESS, c.exist("big"));
            c.send(LmWire.GET, "big");
            await(() -> server.connectionCount() == 0, "the server to close the connection that stopped reading");
        }
        assertEquals(1, server.entryCount());
    }

    @Test
    void anIdleConnectionBetweenRequestsIsNotTimed() throws Exception {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V0).capacityBytes(1 << 20)
                .payloadTimeoutMillis(50).build().start();
        servers.add(server);
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            c.put("k", bytes(1000, 1));
            Thread.sleep(400);
            assertEquals(LmWire.SUCCESS, c.exist("k"));
        }
    }

    @Test
    void aValueEvictedWhileBeingSentStaysIntactUntilSent() throws Exception {
        int size = 8 << 20;
        LmCacheServer server = start(LmProtocolVersion.V0, size);
        byte[] first = bytes(size, 1);
        try (RawLmClient reader = new RawLmClient(server.boundPort(), LmProtocolVersion.V0);
             RawLmClient writer = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
            writer.put("first", first);
            assertEquals(LmWire.SUCCESS, writer.exist("first"));
            reader.send(LmWire.GET, "first");
            assertEquals(size, reader.reply().length());
            writer.put("second", bytes(size, 2));
            assertEquals(LmWire.FAIL, writer.exist("first"));
            assertEquals(2L * size, server.nativeBytesInUse(), "the evicted value must live until sent");
            assertArrayEquals(first, reader.payload(size));
            await(() -> server.nativeBytesInUse() == size, "the evicted value to be freed after sending");
        }
        assertEquals(size, server.storedBytes());
    }

    @Test
    void stopClosesConnectionsAndFreesEveryValue() throws Exception {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).build().start();
        try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
            c.put("k", bytes(4096, 0));
            assertEquals(LmWire.SUCCESS, c.exist("k"));
            assertEquals(4096, server.nativeBytesInUse());
            server.stop();
            assertTrue(c.closedByServer());
        }
        assertEquals(0, server.nativeBytesInUse());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, server::start).code());
    }

    @Test
    void bindingAPortInUseNamesHostAndPort() {
        LmCacheServer first = start(LmProtocolVersion.V0, 100);
        KVException e = assertThrows(KVException.class, () -> LmCacheServer.builder().port(first.boundPort())
                .build().start());
        assertEquals(ErrorCode.IO_ERROR, e.code());
        assertTrue(e.getMessage().contains("127.0.0.1:" + first.boundPort()), e.getMessage());
    }

    @Test
    void builderRefusesBadPortAndCapacity() {
        assertEquals(ErrorCode.INVALID_ARGUMENT,
                assertThrows(KVException.class, () -> LmCacheServer.builder().port(70_000)).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT,
                assertThrows(KVException.class, () -> LmCacheServer.builder().capacityBytes(-1)).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT,
                assertThrows(KVException.class, () -> LmCacheServer.builder().payloadTimeoutMillis(0)).code());
    }

    @Test
    void capacityHoldsUnderConcurrentWritersAndEveryEvictedValueIsFreed() throws Exception {
        int capacity = 64 * 1024;
        LmCacheServer server = start(LmProtocolVersion.V0, capacity);
        int threads = 8;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                done.add(pool.submit(() -> {
                    try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V0)) {
                        for (int i = 0; i < 100; i++) {
                            c.put("w" + id + "-" + (i % 20), bytes(1000 + (i * 37 + id * 101) % 9000, i));
                            if (server.storedBytes() > capacity) {
                                throw new AssertionError(server.storedBytes() + " bytes stored over " + capacity);
                            }
                        }
                        c.exist("sync");
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        await(() -> server.connectionCount() == 0, "connections to end");
        assertTrue(server.storedBytes() <= capacity, server.storedBytes() + " > " + capacity);
        assertTrue(server.evictions() > 0, "no eviction under a small capacity");
        assertEquals(server.storedBytes(), server.nativeBytesInUse(), "evicted or replaced values not freed");
    }

    @Test
    void manyConnectionsAtOnceEachReadBackTheirOwnValues() throws Exception {
        LmCacheServer server = start(LmProtocolVersion.V1, 64 << 20);
        int threads = 16;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                Callable<Integer> job = () -> {
                    int ok = 0;
                    try (RawLmClient c = new RawLmClient(server.boundPort(), LmProtocolVersion.V1)) {
                        for (int i = 0; i < 50; i++) {
                            byte[] v = bytes(1000 + id * 10 + i, id * 100 + i);
                            String key = "t" + id + "-" + i;
                            c.put(key, v);
                            c.send(LmWire.GET, key);
                            LmReplyHeader h = c.reply();
                            assertEquals(v.length, h.length());
                            assertArrayEquals(v, c.payload(h.length()));
                            ok++;
                        }
                    }
                    return ok;
                };
                results.add(pool.submit(job));
            }
            for (Future<Integer> f : results) {
                assertEquals(50, f.get());
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(threads * 50, server.entryCount());
    }
}
