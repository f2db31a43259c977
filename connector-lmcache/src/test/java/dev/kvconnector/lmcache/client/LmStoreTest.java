package dev.kvconnector.lmcache.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The lm:// store against the Java LMCache server, over both protocol versions. */
class LmStoreTest {
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @AfterEach
    void closeEverything() throws Exception {
        for (int i = resources.size() - 1; i >= 0; i--) {
            resources.get(i).close();
            if (resources.get(i) instanceof LmCacheServer s) {
                assertEquals(0, s.nativeBytesInUse());
            }
        }
        arena.close();
    }

    private LmCacheServer server(LmProtocolVersion v, long capacity) {
        LmCacheServer s = LmCacheServer.builder().protocol(v).capacityBytes(capacity).build().start();
        resources.add(s);
        return s;
    }

    private LmStore store(LmCacheServer s, String options) {
        LmStore store = (LmStore) KVStores.open("lm://127.0.0.1:" + s.boundPort() + "?protocol="
                + s.protocol().label() + options);
        resources.add(store);
        return store;
    }

    private MemorySegment value(long n, int seed) {
        MemorySegment s = arena.allocate(n);
        for (long i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + seed));
        }
        return s;
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void putThenGetIntoCopiesTheValueIntoTheCallersSegment(LmProtocolVersion v) {
        LmStore store = store(server(v, 1 << 20), "");
        MemorySegment val = value(1259, 1);
        assertTrue(store.put("k", val, PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(2000);
        assertEquals(1259, store.getInto("k", dst));
        assertEquals(-1, dst.asSlice(0, 1259).mismatch(val));
        assertTrue(store.exists("k"));
        assertEquals(1259, store.size("k"));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void missesAreResultsNotExceptions(LmProtocolVersion v) {
        LmStore store = store(server(v, 1 << 20), "");
        assertEquals(GetResult.MISS, store.getInto("absent", arena.allocate(16)));
        assertFalse(store.exists("absent"));
        assertEquals(-1, store.size("absent"));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void getIntoReturnsTooSmallWithRealSizeAndTheConnectionStaysUsable(LmProtocolVersion v) {
        LmCacheServer server = server(v, 1 << 20);
        LmStore store = store(server, "&pool=1");
        MemorySegment val = value(1000, 2);
        store.put("k", val, PutOptions.DEFAULT);
        long r = store.getInto("k", arena.allocate(999));
        assertTrue(GetResult.isTooSmall(r));
        assertEquals(1000, GetResult.requiredSize(r));
        MemorySegment dst = arena.allocate(1000);
        assertEquals(1000, store.getInto("k", dst));
        assertEquals(-1, dst.mismatch(val));
        assertEquals(1, server.connectionCount());
    }

    @Test
    void tooSmallForAValueAbove8MiBDiscardsTheConnectionInsteadOfDraining() {
        LmCacheServer server = server(LmProtocolVersion.V1, 32 << 20);
        LmStore store = store(server, "&pool=1");
        MemorySegment val = value(9 << 20, 3);
        store.put("big", val, PutOptions.DEFAULT);
        assertEquals(GetResult.tooSmall(9 << 20), store.getInto("big", arena.allocate(16)));
        assertEquals(9 << 20, store.size("big"));
        MemorySegment dst = arena.allocate(9 << 20);
        assertEquals(9 << 20, store.getInto("big", dst));
        assertEquals(-1, dst.mismatch(val));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void removeIsUnsupportedBecauseTheProtocolHasNoDelete(LmProtocolVersion v) {
        LmStore store = store(server(v, 1 << 20), "");
        store.put("k", value(10, 0), PutOptions.DEFAULT);
        KVException e = assertThrows(KVException.class, () -> store.remove("k"));
        assertEquals(ErrorCode.UNSUPPORTED, e.code());
        assertTrue(e.getMessage().contains("no delete"), e.getMessage());
        assertTrue(store.exists("k"));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void putLargerThanTheServersCapacityIsStoreFull(LmProtocolVersion v) {
        LmStore store = store(server(v, 1000), "");
        KVException e = assertThrows(KVException.class, () -> store.put("big", value(1001, 0), PutOptions.DEFAULT));
        assertEquals(ErrorCode.STORE_FULL, e.code());
        assertTrue(e.getMessage().contains("1001 bytes"), e.getMessage());
        assertTrue(store.put("small", value(1000, 0), PutOptions.DEFAULT));
    }

    @Test
    void unconfirmedPutOfATooLargeValueReturnsAndTheValueIsAbsent() {
        LmStore store = store(server(LmProtocolVersion.V0, 1000), "&confirm=false&pool=1");
        assertTrue(store.put("big", value(1001, 0), PutOptions.DEFAULT));
        assertFalse(store.exists("big"));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void ifAbsentPutLeavesAnExistingValue(LmProtocolVersion v) {
        LmStore store = store(server(v, 1 << 20), "");
        store.put("k", value(8, 1), PutOptions.DEFAULT);
        assertFalse(store.put("k", value(8, 2), PutOptions.DEFAULT.withIfAbsent(true)));
        MemorySegment dst = arena.allocate(8);
        store.getInto("k", dst);
        assertEquals(-1, dst.mismatch(value(8, 1)));
        assertTrue(store.put("other", value(8, 2), PutOptions.DEFAULT.withIfAbsent(true)));
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void keysLongerThan150BytesAreRefusedAndTheStoreStaysUsable(LmProtocolVersion v) {
        LmStore store = store(server(v, 1 << 20), "&pool=1");
        String longKey = "vllm@" + "m".repeat(140) + "@1@0@abc";
        KVException e = assertThrows(KVException.class, () -> store.put(longKey, value(8, 0), PutOptions.DEFAULT));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("153 UTF-8 bytes"), e.getMessage());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> store.exists(longKey)).code());
        assertTrue(store.put("short", value(8, 0), PutOptions.DEFAULT));
        assertTrue(store.exists("short"));
    }

    @SuppressWarnings("restricted")
    @Test
    void valuesOf2GiBAndMoreAreRefusedBeforeAnyByteIsSent() {
        LmStore store = store(server(LmProtocolVersion.V0, 1 << 20), "");
        MemorySegment huge = MemorySegment.NULL.reinterpret(1L << 31);
        KVException e = assertThrows(KVException.class, () -> store.put("k", huge, PutOptions.DEFAULT));
        assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
        assertFalse(store.exists("k"));
    }

    @Test
    void v1KeepsTheTensorMetadataOfAPut() {
        LmStore store = store(server(LmProtocolVersion.V1, 1 << 20), "");
        LmObjectMeta meta = new LmObjectMeta(LmWire.FMT_KV_2LTD, 3, 2, 4, 256, 1024);
        store.put("t", value(64, 0), meta);
        LmReplyHeader reply = new LmReplyHeader();
        assertEquals(64, store.getInto("t", arena.allocate(64), reply));
        assertEquals(meta, reply.meta());
        store.put("b", value(10, 0), PutOptions.DEFAULT);
        store.getInto("b", arena.allocate(64), reply);
        assertEquals(LmObjectMeta.bytes(10), reply.meta());
    }

    @Test
    void healthCheckUsesHealthOnV1AndExistOnV0() {
        assertTrue(store(server(LmProtocolVersion.V1, 100), "").healthCheck().contains("HEALTH"));
        assertTrue(store(server(LmProtocolVersion.V0, 100), "").healthCheck().contains("EXIST"));
    }

    @Test
    void listKeysWorksOnV0AndIsUnsupportedOnV1() {
        LmStore v0 = store(server(LmProtocolVersion.V0, 1 << 20), "");
        v0.put("a", value(4, 0), PutOptions.DEFAULT);
        v0.put("b", value(4, 0), PutOptions.DEFAULT);
        assertEquals(List.of("a", "b"), v0.listKeys().stream().sorted().toList());
        LmStore v1 = store(server(LmProtocolVersion.V1, 1 << 20), "");
        assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, v1::listKeys).code());
    }

    @Test
    void aReadOnlyDestinationIsRefusedBeforeAnyRequest() {
        LmCacheServer server = server(LmProtocolVersion.V1, 1 << 20);
        LmStore store = store(server, "&pool=1");
        store.put("k", value(8, 0), PutOptions.DEFAULT);
        KVException e = assertThrows(KVException.class, () -> store.getInto("k", arena.allocate(8).asReadOnly()));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals(8, store.getInto("k", arena.allocate(8)));
    }

    @Test
    void aHeapSegmentCanBePutAndRead() {
        LmStore store = store(server(LmProtocolVersion.V0, 1 << 20), "");
        byte[] src = {1, 2, 3, 4, 5};
        store.put("heap", MemorySegment.ofArray(src), PutOptions.DEFAULT);
        byte[] dst = new byte[5];
        assertEquals(5, store.getInto("heap", MemorySegment.ofArray(dst)));
        assertEquals(java.util.Arrays.toString(src), java.util.Arrays.toString(dst));
    }

    @Test
    void aStaleConnectionAfterAServerRestartIsReplacedTransparently() {
        LmCacheServer first = LmCacheServer.builder().protocol(LmProtocolVersion.V0).build().start();
        int port = first.boundPort();
        LmStore store = (LmStore) KVStores.open("lm://127.0.0.1:" + port + "?protocol=v0&pool=1");
        resources.add(store);
        store.put("k", value(8, 0), PutOptions.DEFAULT);
        first.stop();
        LmCacheServer second = LmCacheServer.builder().protocol(LmProtocolVersion.V0).port(port).build().start();
        resources.add(second);
        assertFalse(store.exists("k"));
        assertTrue(store.put("k", value(8, 0), PutOptions.DEFAULT));
    }

    @Test
    void openingThroughTheServiceLoaderGivesAnLmStore() {
        LmCacheServer s = server(LmProtocolVersion.V1, 100);
        try (KVStore store = KVStores.open("lm://127.0.0.1:" + s.boundPort())) {
            assertInstanceOf(LmStore.class, store);
            assertEquals(LmProtocolVersion.V1, ((LmStore) store).protocol());
            assertEquals(java.util.Set.of(StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.BATCH),
                    store.capabilities());
        }
    }

    @Test
    void badUriOptionsAreInvalidUriErrorsNamingTheOption() {
        for (String uri : new String[] {"lm://h:1?protocl=v0", "lm://h:1?protocol=v9", "lm://h:1?pool=0",
                "lm://h:1?max-reply=4GiB", "lm://h:1?timeout=soon", "lm://h1:1,h2:2"}) {
            KVException e = assertThrows(KVException.class, () -> KVStores.open(uri), uri);
            assertEquals(ErrorCode.INVALID_URI, e.code(), uri);
        }
        KVException e = assertThrows(KVException.class, () -> KVStores.open("lm://h:1?protocl=v0"));
        assertTrue(e.getMessage().contains("protocl"), e.getMessage());
    }

    @Test
    void credentialsAreRefusedBecauseTheProtocolHasNoAuthenticationAndAreNeverShown() {
        for (String uri : new String[] {"lm://u:S3CRET@h:1", "lm://S3CRET@h:1", "lm://:S3%2FCRET@h:1"}) {
            KVException e = assertThrows(KVException.class, () -> KVStores.open(uri), uri);
            assertEquals(ErrorCode.INVALID_URI, e.code(), uri);
            assertFalse(e.getMessage().contains("S3"), e.getMessage());
            assertTrue(e.getMessage().contains("no user name or password"), e.getMessage());
        }
    }

    @Test
    void aClosedStoreFailsWithClosed() {
        LmStore store = store(server(LmProtocolVersion.V0, 100), "");
        store.exists("k");
        store.close();
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.exists("k")).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.remove("k")).code());
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void manyThreadsShareAFewPooledConnections(LmProtocolVersion v) throws Exception {
        LmCacheServer server = server(v, 64 << 20);
        LmStore store = store(server, "&pool=4");
        int threads = 16;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                done.add(pool.submit(() -> {
                    try (Arena local = Arena.ofConfined()) {
                        MemorySegment dst = local.allocate(4096);
                        for (int i = 0; i < 40; i++) {
                            String key = "t" + id + "/" + i;
                            int n = 100 + (id * 40 + i) % 3000;
                            MemorySegment val = local.allocate(n);
                            val.fill((byte) (id + i));
                            assertTrue(store.put(key, val, PutOptions.DEFAULT));
                            assertEquals(n, store.getInto(key, dst));
                            assertEquals(-1, dst.asSlice(0, n).mismatch(val), key);
                            assertTrue(store.exists(key));
                        }
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
        assertEquals(threads * 40, server.entryCount());
        assertTrue(server.connectionCount() <= 4, "at most pool=4 connections, saw " + server.connectionCount());
    }
}
