package dev.kvconnector.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.List;
import org.junit.jupiter.api.Test;

class StoreUriTest {

    @Test
    void parsesUserPasswordHostPortPathAndOptions() {
        StoreUri u = StoreUri.parse("valkey://alice:s3cr%40t@10.0.0.5:6380/2?ttl=30s&pool=4");
        assertEquals("valkey", u.scheme());
        assertEquals("alice", u.user());
        assertEquals("s3cr@t", u.password());
        assertEquals(List.of(new StoreUri.HostPort("10.0.0.5", 6380)), u.hosts());
        assertEquals("/2", u.path());
        assertEquals(30_000, u.durationMillisParam("ttl", 0));
        assertEquals(4, u.intParam("pool", 1));
    }

    @Test
    void maskedFormNeverShowsSecrets() {
        StoreUri u = StoreUri.parse("rediss://bob:hunter2@h:1?password=other&token=abc&ttl=5");
        assertFalse(u.masked().contains("hunter2"), u.masked());
        assertFalse(u.toString().contains("other"));
        assertFalse(u.toString().contains("abc"));
        assertTrue(u.masked().startsWith("rediss://bob:***@h:1"), u.masked());
        StoreUri nested = StoreUri.parse("mooncake://m:50051?metadata=redis://meta:hunter3@h:6379");
        assertFalse(nested.masked().contains("hunter3"), nested.masked());
        assertTrue(nested.masked().contains("metadata=redis://meta:***@h:6379"), nested.masked());
        KVException e = assertThrows(KVException.class, () -> StoreUri.parse("valkey://u:hunter2@h:99999"));
        assertFalse(e.getMessage().contains("hunter2"), e.getMessage());
    }

    @Test
    void opaqueAndClusterFormsParse() {
        assertEquals("/kv", StoreUri.parse("shm:/kv?capacity=4GiB").path());
        assertEquals(4L << 30, StoreUri.parse("shm:/kv?capacity=4GiB").sizeParam("capacity", 0));
        assertEquals(2, StoreUri.parse("valkey+cluster://a:7000,b:7001").hosts().size());
        assertEquals(0, StoreUri.parse("memory:").hosts().size());
        assertEquals(new StoreUri.HostPort("::1", 6379), StoreUri.parse("valkey://[::1]:6379").hosts().getFirst());
    }

    @Test
    void sizesAndDurationsUseBinaryAndDecimalUnits() {
        assertEquals(512L << 20, StoreUri.parseSize("x", "512MiB", "u"));
        assertEquals(1_000_000_000L, StoreUri.parseSize("x", "1GB", "u"));
        assertEquals(4096, StoreUri.parseSize("x", "4096", "u"));
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> StoreUri.parseSize("x", "99999999999TiB", "u")).code());
        assertEquals(120_000, StoreUri.parse("m:?t=2m").durationMillisParam("t", 0));
    }

    @Test
    void malformedUrisNameTheProblem() {
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("valkey://h:63x79")).getMessage().contains("port"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("")).getMessage().contains("empty"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("/dev/shm/x")).getMessage().contains("scheme"));
        assertTrue(assertThrows(KVException.class, () -> StoreUri.parse("m:?a=1&a=2")).getMessage().contains("twice"));
    }

    @Test
    void unknownSchemeListsTheSchemesOnTheClassPath() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open("etcd://h:2379"));
        assertEquals(ErrorCode.UNKNOWN_STORE, e.code());
        assertTrue(e.getMessage().contains("memory"), e.getMessage());
        assertTrue(e.getMessage().contains("etcd"), e.getMessage());
    }
}
