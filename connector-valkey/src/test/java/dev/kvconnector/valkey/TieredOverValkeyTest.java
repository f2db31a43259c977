package dev.kvconnector.valkey;

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
import dev.kvconnector.store.tiered.TieredStore;
import dev.kvconnector.testkit.KVStoreContract;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code tiered:} with a real redis-server as its remote tier: the contract, and a remote that dies and returns. */
class TieredOverValkeyTest {
    @TempDir
    static Path dir;

    static String shm() {
        return "shm:/tiered-valkey-" + UUID.randomUUID() + "?capacity=64MiB&dir=" + dir;
    }

    @Nested
    class Contract extends KVStoreContract {
        private static RedisServerProcess server;

        @BeforeAll
        static void startServer() {
            server = RedisServerProcess.start();
        }

        @AfterAll
        static void stopServer() {
            if (server != null) {
                server.close();
            }
        }

        @Override
        protected KVStore openStore() {
            return KVStores.open("tiered:[" + shm() + "][valkey://" + server.hostPort() + "?pool=4]?write=back");
        }
    }

    @Test
    void aRemoteThatDiesFailsNoReadTheLocalTierServesAndGetsTheWriteBacksOnceItReturns() throws Exception {
        try (RedisServerProcess server = RedisServerProcess.startWithPassword("hunter2");
             KVStore remote = KVStores.open("valkey://:hunter2@" + server.hostPort() + "?timeout=2s&pool=2");
             TieredStore store = (TieredStore) KVStores.open("tiered:[" + shm() + "][valkey://:hunter2@"
                     + server.hostPort() + "?timeout=2s&pool=2]?write=back");
             Arena arena = Arena.ofShared()) {
            assertFalse(store.uri().contains("hunter2"), store.uri());
            MemorySegment v = Segments.random(arena, 256 << 10, '*', 1);
            MemorySegment dst = arena.allocate(256 << 10);
            assertTrue(store.put("before", v, PutOptions.DEFAULT));
            assertTrue(store.flush(10_000));
            assertEquals(256 << 10, remote.getInto("before", dst), "the write-back did not reach redis");
            remote.put("only-remote", v, PutOptions.DEFAULT);

            server.kill();

            assertEquals(256 << 10, store.getInto("before", dst), "a local hit failed while the remote was down");
            assertTrue(store.put("during", v, PutOptions.DEFAULT), "a write-back put failed while the remote was down");
            assertEquals(256 << 10, store.getInto("during", dst));
            KVException remoteOnly = assertThrows(KVException.class, () -> store.getInto("only-remote", dst));
            assertEquals(ErrorCode.STORE_UNREACHABLE, remoteOnly.code());
            assertTrue(remoteOnly.getMessage().contains("tier 2 of 2 (valkey://") && remoteOnly.getMessage()
                    .contains(server.hostPort()), remoteOnly.getMessage());
            assertFalse(remoteOnly.toString().contains("hunter2"), remoteOnly.toString());
            assertFalse(store.flush(500), "the write-back claims to be done while redis is down");

            server.restart();

            assertTrue(store.flush(20_000), "the write-back did not drain after redis came back: "
                    + store.writeBackStats());
            try (KVStore fresh = KVStores.open("valkey://:hunter2@" + server.hostPort())) {
                assertEquals(256 << 10, fresh.getInto("during", dst));
            }
            assertEquals(-1, Segments.mismatch(v, dst, 256 << 10));
            assertTrue(store.writeBackStats().failed() >= 1, store.writeBackStats().toString());
            assertTrue(GetResult.isMiss(store.getInto("only-remote", dst)), "a restarted redis without "
                    + "persistence is empty");
        }
    }
}
