package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The store's semantics against a real redis-server, once per RESP version (see the subclasses). */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class AbstractValkeyStoreTest {
    /** Every RESP2 and RESP3 type byte: a value starting with one must still come back as bytes. */
    static final String RESP_TYPE_BYTES = "+-:$*%_,#!=(|~>";
    private static final AtomicInteger KEYS = new AtomicInteger();

    RedisServerProcess server;
    ValkeyStore store;
    Arena arena;

    /** "2" or "3". */
    abstract String protocol();

    @BeforeAll
    void startServer() {
        server = RedisServerProcess.start();
        store = (ValkeyStore) KVStores.open("valkey://" + server.hostPort() + "?protocol=" + protocol()
                + "&pool=2&timeout=10s");
    }

    @AfterAll
    void stopServer() {
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

    @BeforeEach
    void openArena() {
        arena = Arena.ofConfined();
    }

    @AfterEach
    void closeArena() {
        arena.close();
    }

    static String key(String what) {
        return "test:" + what + ":" + KEYS.incrementAndGet();
    }

    @Test
    void negotiatesTheRequestedProtocol() {
        assertEquals(Integer.parseInt(protocol()), store.protocol());
    }

    @Test
    void declaresTtlBatchSharingRemoveEventsAndPipelinedReads() {
        assertEquals(java.util.Set.of(StoreCapability.NATIVE_TTL, StoreCapability.BATCH,
                StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.REMOVE, StoreCapability.EVENTS,
                StoreCapability.PIPELINED_READ),
                store.capabilities());
    }

    @ParameterizedTest
    @ValueSource(longs = {0, 1, 2, 4095, 4096, 4097, 16 * 1024 + 1, 64 * 1024 + 3, 1 << 20})
    void putThenGetIntoReturnsTheSameBytes(long size) {
        String k = key("roundtrip");
        MemorySegment v = Segments.random(arena, size, 0x41, size);
        assertTrue(store.put(k, v, PutOptions.DEFAULT));
        MemorySegment dst = Segments.zeroed(arena, size + 16);
        assertEquals(size, store.getInto(k, dst));
        assertEquals(-1, Segments.mismatch(v, dst, size));
        assertEquals(size, store.size(k));
        assertTrue(store.exists(k));
    }

    @Test
    void sixtyFourMebibyteValueRoundTrips() {
        long size = 64L << 20;
        String k = key("big");
        MemorySegment v = Segments.random(arena, size, '*', 64);
        assertTrue(store.put(k, v, PutOptions.DEFAULT));
        MemorySegment dst = Segments.zeroed(arena, size);
        assertEquals(size, store.getInto(k, dst));
        assertEquals(-1, Segments.mismatch(v, dst, size));
        assertTrue(store.remove(k));
    }

    @Test
    void valuesBeginningWithEveryRespTypeByteRoundTrip() {
        for (long size : new long[] {1, 2, 16 * 1024 + 1, 256 * 1024}) {
            for (char t : RESP_TYPE_BYTES.toCharArray()) {
                String k = key("type-" + (int) t + "-" + size);
                MemorySegment v = Segments.random(arena, size, t, t * 31L + size);
                if (size > 2) {
                    // A payload that looks like a complete RESP reply tempts a parser that sniffs content.
                    v.set(ValueLayout.JAVA_BYTE, 1, (byte) '1');
                    v.set(ValueLayout.JAVA_BYTE, 2, (byte) '\r');
                }
                assertTrue(store.put(k, v, PutOptions.DEFAULT));
                MemorySegment dst = Segments.zeroed(arena, size);
                assertEquals(size, store.getInto(k, dst), "value starting with '" + t + "', " + size + " bytes");
                assertEquals(-1, Segments.mismatch(v, dst, size), "value starting with '" + t + "'");
            }
        }
    }

    @Test
    void emptyValueIsAHitOfZeroBytesAndHasSizeZero() {
        String k = key("empty");
        assertTrue(store.put(k, MemorySegment.NULL, PutOptions.DEFAULT));
        assertEquals(0, store.getInto(k, Segments.zeroed(arena, 8)));
        assertEquals(0, store.getInto(k, MemorySegment.NULL));
        assertEquals(0, store.size(k));
        assertTrue(store.exists(k));
    }

    @Test
    void getIntoReturnsMissForAbsentKeyAndSizeIsMinusOne() {
        String k = key("absent");
        assertEquals(GetResult.MISS, store.getInto(k, Segments.zeroed(arena, 16)));
        assertEquals(-1, store.size(k));
        assertFalse(store.exists(k));
    }

    @Test
    void getIntoReturnsTooSmallWithRealSizeAndTheConnectionStaysUsable() {
        String k = key("small");
        long size = 300_000;
        MemorySegment v = Segments.random(arena, size, '$', 7);
        store.put(k, v, PutOptions.DEFAULT);
        for (int i = 0; i < 4; i++) {
            MemorySegment dst = Segments.zeroed(arena, size - 1);
            long r = store.getInto(k, dst);
            assertTrue(GetResult.isTooSmall(r), GetResult.describe(r));
            assertEquals(size, GetResult.requiredSize(r));
            assertEquals(0, dst.get(ValueLayout.JAVA_BYTE, 0), "nothing is copied on too-small");
        }
        MemorySegment dst = Segments.zeroed(arena, size);
        assertEquals(size, store.getInto(k, dst));
        assertEquals(-1, Segments.mismatch(v, dst, size));
    }

    @Test
    void putWithTtlExpires() throws InterruptedException {
        String k = key("ttl");
        store.put(k, Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT.withTtlMillis(150));
        long pttl = Long.parseLong(server.command("PTTL", k).substring(1));
        assertTrue(pttl > 0 && pttl <= 150, "PTTL " + pttl);
        Thread.sleep(400);
        assertEquals(GetResult.MISS, store.getInto(k, Segments.zeroed(arena, 10)));
    }

    @Test
    void uriTtlIsTheDefaultForPutsWithoutOne() {
        try (KVStore s = KVStores.open("valkey://" + server.hostPort() + "?ttl=60s&protocol=" + protocol())) {
            String k = key("default-ttl");
            s.put(k, Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT);
            long pttl = Long.parseLong(server.command("PTTL", k).substring(1));
            assertTrue(pttl > 50_000 && pttl <= 60_000, "PTTL " + pttl);
        }
        String noTtl = key("no-ttl");
        store.put(noTtl, Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT);
        assertEquals(":-1", server.command("PTTL", noTtl));
    }

    @Test
    void putIfAbsentKeepsTheFirstValue() {
        String k = key("nx");
        MemorySegment first = Segments.random(arena, 100, 1, 1);
        MemorySegment second = Segments.random(arena, 100, 2, 2);
        assertTrue(store.put(k, first, PutOptions.DEFAULT.withIfAbsent(true)));
        assertFalse(store.put(k, second, PutOptions.DEFAULT.withIfAbsent(true)));
        MemorySegment dst = Segments.zeroed(arena, 100);
        store.getInto(k, dst);
        assertEquals(-1, Segments.mismatch(first, dst, 100));
        assertTrue(store.put(k, second, PutOptions.DEFAULT));
        store.getInto(k, dst);
        assertEquals(-1, Segments.mismatch(second, dst, 100));
    }

    @Test
    void removeReportsWhetherTheKeyExisted() {
        String k = key("rm");
        store.put(k, Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT);
        assertTrue(store.remove(k));
        assertFalse(store.remove(k));
        assertEquals(GetResult.MISS, store.getInto(k, Segments.zeroed(arena, 10)));
    }

    @Test
    void batchOfAllLayersIsPipelinedWithPerKeyResults() {
        int layers = 32;
        String[] keys = new String[layers + 2];
        MemorySegment[] values = new MemorySegment[layers];
        for (int i = 0; i < layers; i++) {
            keys[i] = key("layer" + i);
            values[i] = Segments.random(arena, 64 * 1024 + i, RESP_TYPE_BYTES.charAt(i % 15), i);
        }
        boolean[] stored = new boolean[layers];
        store.putBatch(keys, values, layers, PutOptions.DEFAULT, stored);
        for (boolean b : stored) {
            assertTrue(b);
        }
        keys[layers] = key("missing");
        keys[layers + 1] = keys[3];
        MemorySegment[] dsts = new MemorySegment[layers + 2];
        for (int i = 0; i < layers; i++) {
            dsts[i] = Segments.zeroed(arena, values[i].byteSize());
        }
        dsts[layers] = Segments.zeroed(arena, 10);
        dsts[layers + 1] = Segments.zeroed(arena, 10);
        long[] results = new long[layers + 2];
        store.getIntoBatch(keys, dsts, layers + 2, results);
        for (int i = 0; i < layers; i++) {
            assertEquals(values[i].byteSize(), results[i], "layer " + i);
            assertEquals(-1, Segments.mismatch(values[i], dsts[i], values[i].byteSize()), "layer " + i);
        }
        assertEquals(GetResult.MISS, results[layers]);
        assertEquals(GetResult.tooSmall(values[3].byteSize()), results[layers + 1]);
        assertEquals(layers, store.removeBatch(keys, layers + 1));
        assertEquals(0, store.removeBatch(keys, layers));
    }

    @Test
    void batchIfAbsentReportsWhichKeysWereStored() {
        String existing = key("batch-nx-old");
        store.put(existing, Segments.random(arena, 5, 1, 1), PutOptions.DEFAULT);
        String[] keys = {key("batch-nx-new"), existing};
        MemorySegment[] values = {Segments.random(arena, 5, 2, 2), Segments.random(arena, 5, 3, 3)};
        boolean[] stored = new boolean[2];
        store.putBatch(keys, values, 2, PutOptions.DEFAULT.withIfAbsent(true), stored);
        assertArrayEquals(new boolean[] {true, false}, stored);
    }

    @Test
    void sameSegmentTwiceInOneBatchIsWrittenTwice() {
        MemorySegment v = Segments.random(arena, 200_000, '%', 9);
        String[] keys = {key("twice-a"), key("twice-b")};
        store.putBatch(keys, new MemorySegment[] {v, v}, 2, PutOptions.DEFAULT, new boolean[2]);
        for (String k : keys) {
            MemorySegment dst = Segments.zeroed(arena, v.byteSize());
            assertEquals(v.byteSize(), store.getInto(k, dst));
            assertEquals(-1, Segments.mismatch(v, dst, v.byteSize()));
        }
    }

    @Test
    void heapSegmentsRoundTripThroughTheBuffers() {
        for (int size : new int[] {10, 100_000}) {
            long[] longs = new long[size / 8 + 1];
            for (int i = 0; i < longs.length; i++) {
                longs[i] = i * 0x9E3779B97F4A7C15L;
            }
            MemorySegment v = MemorySegment.ofArray(longs).asSlice(0, size);
            String k = key("heap");
            store.put(k, v, PutOptions.DEFAULT);
            MemorySegment dst = MemorySegment.ofArray(new long[longs.length]).asSlice(0, size);
            assertEquals(size, store.getInto(k, dst));
            assertEquals(-1, v.mismatch(dst));
            MemorySegment bytes = MemorySegment.ofArray(new byte[size]);
            assertEquals(size, store.getInto(k, bytes));
            assertEquals(-1, v.mismatch(bytes));
        }
    }

    @Test
    void nonAsciiKeysAreDistinctAndRoundTrip() {
        String a = key("schlüssel-ключ-🔑");
        String b = key("schlussel");
        store.put(a, Segments.random(arena, 3, 1, 1), PutOptions.DEFAULT);
        assertEquals(3, store.size(a));
        assertEquals(-1, store.size(b));
        assertEquals("$3", server.command("GET", a).substring(0, 2));
    }

    @Test
    void wrongTypeKeyIsAStoreErrorThatNamesTheServerAndKeepsTheConnection() {
        String k = key("list");
        server.command("LPUSH", k, "x");
        KVException e = assertThrows(KVException.class, () -> store.getInto(k, Segments.zeroed(arena, 8)));
        assertEquals(ErrorCode.STORE_ERROR, e.code());
        assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("WRONGTYPE"),
                e.getMessage());
        assertEquals(k, e.key());
        String ok = key("after-wrongtype");
        assertTrue(store.put(ok, Segments.random(arena, 4, 1, 1), PutOptions.DEFAULT));
    }

    @Test
    void readOnlyDestinationIsRejected() {
        KVException e = assertThrows(KVException.class,
                () -> store.getInto(key("ro"), Segments.zeroed(arena, 8).asReadOnly()));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }

    @Test
    void valueLargerThanProtoMaxBulkLenIsRefusedUpFront() {
        assertEquals(512L << 20, store.maxValueBytes());
        server.command("CONFIG", "SET", "proto-max-bulk-len", "1048576");
        try (ValkeyStore small = (ValkeyStore) KVStores.open("valkey://" + server.hostPort())) {
            assertEquals(1 << 20, small.maxValueBytes());
            String k = key("too-large");
            KVException e = assertThrows(KVException.class,
                    () -> small.put(k, Segments.zeroed(arena, (1 << 20) + 1), PutOptions.DEFAULT));
            assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
            assertTrue(e.getMessage().contains("1048577") && e.getMessage().contains("1048576"), e.getMessage());
            assertTrue(small.put(k, Segments.zeroed(arena, 1 << 20), PutOptions.DEFAULT));
        } finally {
            server.command("CONFIG", "SET", "proto-max-bulk-len", Long.toString(512L << 20));
        }
    }

    @Test
    void replyLargerThanMaxReplyIsAProtocolErrorAndTheNextCallWorks() {
        String k = key("max-reply");
        store.put(k, Segments.random(arena, 5000, 1, 1), PutOptions.DEFAULT);
        try (KVStore s = KVStores.open("valkey://" + server.hostPort() + "?max-reply=4096&pool=1")) {
            KVException e = assertThrows(KVException.class, () -> s.getInto(k, Segments.zeroed(arena, 8192)));
            assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
            assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("max-reply=4096"),
                    e.getMessage());
            assertEquals(GetResult.MISS, s.getInto(key("small-one"), Segments.zeroed(arena, 8)));
        }
    }

    @Test
    void healthCheckNamesVersionModeAndProtocol() {
        String h = store.healthCheck();
        assertTrue(h.contains("answered PING") && h.contains("mode standalone") && h.contains("RESP" + protocol())
                && h.matches(".*\\d+\\.\\d+\\.\\d+.*"), h);
    }

    @Test
    void databaseInThePathIsSelected() {
        try (KVStore db3 = KVStores.open("redis://" + server.hostPort() + "/3?protocol=" + protocol())) {
            String k = key("db3");
            db3.put(k, Segments.random(arena, 4, 1, 1), PutOptions.DEFAULT);
            assertEquals(-1, store.size(k), "database 0 does not see database 3's key");
            assertEquals(4, db3.size(k));
        }
    }

    @Test
    void databaseBeyondTheServersCountIsAConfigError() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://" + server.hostPort() + "/99"));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
    }

    @Test
    void closedStoreFailsWithClosed() {
        KVStore s = KVStores.open("valkey://" + server.hostPort());
        s.close();
        s.close();
        KVException e = assertThrows(KVException.class, () -> s.getInto("k", Segments.zeroed(arena, 8)));
        assertEquals(ErrorCode.CLOSED, e.code());
    }
}
