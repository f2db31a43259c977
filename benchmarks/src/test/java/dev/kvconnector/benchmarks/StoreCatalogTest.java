package dev.kvconnector.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class StoreCatalogTest {

    @Test
    void memoryIsAlwaysListedAndOthersOnlyWhenTheirProviderIsPresent() {
        assertEquals(List.of(StoreCatalog.MEMORY), StoreCatalog.stores(Set.of("memory"), true, null));
        assertEquals(List.of(StoreCatalog.MEMORY, StoreCatalog.SHM, StoreCatalog.VALKEY),
                StoreCatalog.stores(Set.of("memory", "shm", "valkey"), true, ""));
    }

    @Test
    void lmIsListedWithItsProviderAndLeftOutOfTheRemovableStores() {
        List<String> all = StoreCatalog.stores(Set.of("memory", "lm"), false, "mooncake://m:1");
        assertEquals(List.of(StoreCatalog.MEMORY, StoreCatalog.LM, "mooncake://m:1"), all);
        assertEquals(List.of(StoreCatalog.MEMORY, "mooncake://m:1"), StoreCatalog.removable(all));
    }

    @Test
    void lmserverPlaceholderStartsTheJavaLmcacheServerAndStopsItAtClose() throws IOException {
        String hostPort;
        try (StoreFixture f = StoreFixture.start(StoreCatalog.LM);
             dev.kvconnector.store.KVStore lm = dev.kvconnector.store.KVStores.open(f.uri())) {
            hostPort = f.uri().substring("lm://".length());
            assertTrue(lm.healthCheck().contains("HEALTH"), lm.healthCheck());
        }
        int port = Integer.parseInt(hostPort.substring(hostPort.indexOf(':') + 1));
        assertThrows(IOException.class, () -> new Socket(InetAddress.getLoopbackAddress(), port).close(),
                "the server must be gone after close");
    }

    @Test
    void valkeyNeedsALocalServerBinary() {
        assertEquals(List.of(StoreCatalog.MEMORY), StoreCatalog.stores(Set.of("memory", "valkey"), false, null));
    }

    @Test
    void extraStoresAreAppendedOnceAndTrimmed() {
        assertEquals(List.of(StoreCatalog.MEMORY, "lm://127.0.0.1:65432"),
                StoreCatalog.stores(Set.of("memory"), false, " lm://127.0.0.1:65432 ,," + StoreCatalog.MEMORY));
    }

    @Test
    void uriWithoutPlaceholdersIsOpenedAsGiven() {
        try (StoreFixture f = StoreFixture.start("memory:?capacity=1MiB")) {
            assertEquals("memory:?capacity=1MiB", f.uri());
        }
    }

    @Test
    void uniquePlaceholderGivesEachTrialItsOwnName() {
        try (StoreFixture a = StoreFixture.start("shm:/kvc-bench-{unique}");
                StoreFixture b = StoreFixture.start("shm:/kvc-bench-{unique}")) {
            assertTrue(a.uri().startsWith("shm:/kvc-bench-" + ProcessHandle.current().pid() + "-"), a.uri());
            assertTrue(!a.uri().equals(b.uri()), a.uri() + " twice");
        }
    }

    @Test
    void unknownPlaceholderIsRejected() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> StoreFixture.start("lm://{nosuch}"));
        assertTrue(e.getMessage().contains("{nosuch}"), e.getMessage());
    }

    @Test
    void redisPlaceholderStartsAServerThatAnswersAndStopsAtClose() throws IOException {
        assumeTrue(RedisServerFixture.findServer() != null, "redis-server is not installed");
        String hostPort;
        try (StoreFixture f = StoreFixture.start("valkey://{redis}/0")) {
            hostPort = f.uri().substring("valkey://".length(), f.uri().length() - 2);
            assertEquals("+PONG\r\n", ping(hostPort));
        }
        assertThrows(IOException.class, () -> ping(hostPort), "the server must be gone after close");
    }

    private static String ping(String hostPort) throws IOException {
        int port = Integer.parseInt(hostPort.substring(hostPort.indexOf(':') + 1));
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(2000);
            s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            InputStream in = s.getInputStream();
            return new String(in.readNBytes(7), StandardCharsets.US_ASCII);
        }
    }

    @Test
    void mooncakeDoubleUriNamesTheLibraryAndParses() {
        String uri = StoreCatalog.mooncakeDouble("/x/libmooncake_store_double.so");
        var parsed = dev.kvconnector.store.StoreUri.parse(uri);
        assertEquals("mooncake", parsed.scheme());
        assertEquals("/x/libmooncake_store_double.so", parsed.param("library"));
        assertEquals("P2PHANDSHAKE", parsed.param("metadata"));
    }
}
