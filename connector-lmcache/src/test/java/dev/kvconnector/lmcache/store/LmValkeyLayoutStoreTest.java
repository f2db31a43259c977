package dev.kvconnector.lmcache.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.testkit.LeakCheck;
import dev.kvconnector.testkit.Segments;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The LMCache Redis layouts against a real redis-server, checked through a plain valkey:// store. */
@ExtendWith(LeakCheck.class)
class LmValkeyLayoutStoreTest {
    private static RedisServerProcess redis;

    @BeforeAll
    static void startRedis() {
        redis = RedisServerProcess.start();
    }

    @AfterAll
    static void stopRedis() {
        if (redis != null) {
            redis.close();
        }
    }

    @BeforeEach
    void flush() {
        redis.command("FLUSHALL");
    }

    /** A chunk object: 28-byte metadata saying {@code kv} bytes, then {@code kv} random bytes. */
    private static MemorySegment chunkObject(Arena arena, int kv, long seed) {
        MemorySegment s = Segments.random(arena, 28 + kv, seed);
        LmRemoteMetadata.of(kv, 1, 3, 2, 1, kv / 4, 1).encode(s, 0);
        return s;
    }

    private static void assertBytes(KVStore plain, String key, MemorySegment expected) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(expected.byteSize() + 16);
            assertEquals(expected.byteSize(), plain.getInto(key, dst), key);
            assertEquals(-1, dst.asSlice(0, expected.byteSize()).mismatch(expected), key);
        }
    }

    @Test
    void redisV1LayoutWritesKvBytesAndMetadataUnderTheKeyWithNoSeparator() {
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+valkey://" + redis.hostPort());
             KVStore plain = KVStores.open("valkey://" + redis.hostPort())) {
            MemorySegment obj = chunkObject(arena, 4096, 1);
            String key = "m@1@0@abc@bfloat16";
            assertTrue(lm.put(key, obj, PutOptions.DEFAULT));
            assertBytes(plain, key + "kv_bytes", obj.asSlice(28));
            assertBytes(plain, key + "metadata", obj.asSlice(0, 28));
            assertEquals("2", redis.command("DBSIZE").substring(1), "exactly two keys");
            assertTrue(lm.exists(key));
            assertEquals(28 + 4096, lm.size(key));
            MemorySegment back = arena.allocate(28 + 4096);
            assertEquals(28 + 4096, lm.getInto(key, back));
            assertEquals(-1, back.mismatch(obj));
            assertTrue(GetResult.isTooSmall(lm.getInto(key, arena.allocate(100))));
            assertEquals(28 + 4096, GetResult.requiredSize(lm.getInto(key, arena.allocate(100))));
            assertTrue(lm.remove(key));
            assertEquals("0", redis.command("DBSIZE").substring(1));
            assertEquals(GetResult.MISS, lm.getInto(key, back));
        }
    }

    @Test
    void valkeyLegacyLayoutUsesColonSeparatedKeys() {
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+valkey://" + redis.hostPort() + "?layout=valkey-legacy");
             KVStore plain = KVStores.open("redis://" + redis.hostPort())) {
            MemorySegment obj = chunkObject(arena, 64, 2);
            lm.put("k", obj, PutOptions.DEFAULT);
            assertBytes(plain, "k:kv_bytes", obj.asSlice(28));
            assertBytes(plain, "k:metadata", obj.asSlice(0, 28));
            assertTrue(((LmValkeyLayoutStore) lm).healthCheck().contains("valkey-legacy"));
        }
    }

    @Test
    void batchesRoundTripAndIfAbsentChecksTheMetadataKey() {
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+redis://" + redis.hostPort() + "?ttl=60s")) {
            String[] keys = {"a", "b", "c"};
            MemorySegment[] values = {chunkObject(arena, 16, 3), chunkObject(arena, 8000, 4),
                    chunkObject(arena, 0, 5)};
            boolean[] stored = new boolean[3];
            lm.putBatch(keys, values, 3, PutOptions.DEFAULT, stored);
            assertTrue(stored[0] && stored[1] && stored[2]);
            long ttl = Long.parseLong(redis.command("PTTL", "bkv_bytes").substring(1));
            assertTrue(ttl > 0 && ttl <= 60_000, "the inner store's ttl= applies: " + ttl);
            MemorySegment[] dsts = {arena.allocate(44), arena.allocate(8028), arena.allocate(28)};
            long[] results = new long[3];
            lm.getIntoBatch(keys, dsts, 3, results);
            for (int i = 0; i < 3; i++) {
                assertEquals(values[i].byteSize(), results[i]);
                assertEquals(-1, dsts[i].mismatch(values[i]));
            }
            assertFalse(lm.put("a", chunkObject(arena, 16, 6), PutOptions.DEFAULT.withIfAbsent(true)));
        }
    }

    @Test
    void aValueThatIsNotAChunkObjectIsRefusedAndNothingIsWritten() {
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+valkey://" + redis.hostPort())) {
            MemorySegment obj = chunkObject(arena, 100, 7);
            KVException wrongLength = assertThrows(KVException.class,
                    () -> lm.put("x", obj.asSlice(0, 120), PutOptions.DEFAULT));
            assertEquals(ErrorCode.INVALID_ARGUMENT, wrongLength.code());
            assertTrue(wrongLength.getMessage().contains("length=100 but 92 bytes"), wrongLength.getMessage());
            KVException tooShort = assertThrows(KVException.class,
                    () -> lm.put("x", obj.asSlice(0, 10), PutOptions.DEFAULT));
            assertEquals(ErrorCode.INVALID_ARGUMENT, tooShort.code());
            assertEquals("0", redis.command("DBSIZE").substring(1));
        }
    }

    @Test
    void inconsistentKeysReadAsMissOrCorruptNeverAsBytes() {
        try (Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+valkey://" + redis.hostPort());
             KVStore plain = KVStores.open("valkey://" + redis.hostPort())) {
            MemorySegment obj = chunkObject(arena, 64, 8);
            MemorySegment dst = arena.allocate(28 + 64);
            lm.put("k", obj, PutOptions.DEFAULT);
            plain.remove("kkv_bytes");
            assertEquals(GetResult.MISS, lm.getInto("k", dst), "KV evicted apart from its metadata");
            assertEquals(-1, lm.size("k"));
            plain.put("kkv_bytes", obj.asSlice(28, 32), PutOptions.DEFAULT);
            KVException shorter = assertThrows(KVException.class, () -> lm.getInto("k", dst));
            assertEquals(ErrorCode.CORRUPT_OBJECT, shorter.code());
            assertTrue(shorter.getMessage().contains("length=64 but 32"), shorter.getMessage());
            plain.put("kmetadata", obj.asSlice(0, 20), PutOptions.DEFAULT);
            KVException header = assertThrows(KVException.class, () -> lm.getInto("k", dst));
            assertEquals(ErrorCode.CORRUPT_OBJECT, header.code());
        }
    }

    @Test
    void aServerThatRefusesThePutIsStoreFull() {
        try (RedisServerProcess small = RedisServerProcess.start("--maxmemory", "2mb", "--maxmemory-policy",
                "noeviction");
             Arena arena = Arena.ofConfined();
             KVStore lm = KVStores.open("lmcache+valkey://" + small.hostPort())) {
            KVException e = assertThrows(KVException.class, () -> {
                for (int i = 0; i < 64; i++) {
                    lm.put("k" + i, chunkObject(arena, 256 * 1024, i), PutOptions.DEFAULT);
                }
            });
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertTrue(e.getMessage().contains(small.hostPort()), e.getMessage());
        }
    }

    @Test
    void badOptionsAreInvalidUri() {
        KVException layout = assertThrows(KVException.class,
                () -> KVStores.open("lmcache+valkey://" + redis.hostPort() + "?layout=flat"));
        assertEquals(ErrorCode.INVALID_URI, layout.code());
        KVException unknown = assertThrows(KVException.class,
                () -> KVStores.open("lmcache+valkey://" + redis.hostPort() + "?layuot=redis-v1"));
        assertEquals(ErrorCode.INVALID_URI, unknown.code());
        assertTrue(unknown.getMessage().contains("layuot"), unknown.getMessage());
    }

    @Test
    void theInnerUriKeepsCredentialsHostsAndOptions() {
        var uri = dev.kvconnector.store.StoreUri.parse(
                "lmcache+valkey://u:p%40ss@h1:7000,[::1]:7001/2?layout=valkey-legacy&ttl=5s");
        assertEquals("valkey://u:p%40ss@h1:7000,[::1]:7001/2?ttl=5s",
                InnerStoreUri.text(uri, "valkey", LmValkeyLayoutStore.OPTIONS));
    }

    @Test
    void theInnerUriKeepsEveryCharacterOfThePasswordAndOptions() {
        String pw = "a+b c/d?e#f@g:h%i\u00e9";
        var outer = dev.kvconnector.store.StoreUri.parse("lmcache+valkey://u:"
                + dev.kvconnector.store.StoreUri.encode(pw) + "@h:1?layout=valkey-legacy&ttl=5s&x=a+b");
        var inner = dev.kvconnector.store.StoreUri.parse(
                InnerStoreUri.text(outer, "valkey", LmValkeyLayoutStore.OPTIONS));
        assertEquals(pw, inner.password());
        assertEquals("a+b", inner.param("x"));
        assertEquals("5s", inner.param("ttl"));
    }
}
