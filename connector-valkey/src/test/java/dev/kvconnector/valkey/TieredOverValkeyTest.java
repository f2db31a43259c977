package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
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
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tiered:} with a real redis-server as its remote tier: the contract, a remote that dies and returns, and a
 * connector's consuming drop-select served by the local tier while redis is down.
 */
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

    @Test
    void aConnectorsConsumingDropSelectWhileRedisIsDownIsServedFromTheLocalTierAndRemovesBelowOnceItIsBack()
            throws Exception {
        KVLayout layout = KVLayout.preset("qwen2.5-0.5b");
        BlockTable table = new BlockTable(new int[] {0, 1, 2}, 16, 40);
        RequestTokens prompt = RequestTokens.of(IntStream.range(0, 40).toArray());
        List<String> reported = new CopyOnWriteArrayList<>();
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore remote = KVStores.open("valkey://" + server.hostPort() + "?pool=2");
             StoreConnector kv = KVStoreConnector.builder("tiered:[" + shm() + "][valkey://" + server.hostPort()
                     + "?timeout=2s&pool=2]", layout).chunkTokens(16).dropMode(DropMode.CONSUME)
                     .errorHandler((where, f) -> reported.add(where + ": " + f.getMessage())).build();
             PagedKVCache source = PagedKVCache.allocate(layout, 3);
             PagedKVCache target = PagedKVCache.allocate(layout, 3)) {
            try (InsertSession s = kv.beginInsert(prompt)) {
                s.putLayers(LayerSource.paged(source, table));
                s.commit();
            }
            server.kill();

            DropResult r = kv.dropSelect(prompt, DropTarget.paged(target, table));

            assertTrue(r.isComplete(), "the local tier held it all: " + r);
            assertTrue(reported.stream().anyMatch(m -> m.contains("from tier 2 (valkey://") && m.contains(
                    "retrying")), reported.toString());
            TieredStore store = (TieredStore) kv.store();
            assertTrue(store.writeBackStats().removals() > 0, store.writeBackStats().toString());
            server.restart();
            assertTrue(store.flush(20_000), store.writeBackStats().toString());
            assertEquals(0, store.writeBackStats().removals());
            assertEquals(-1, remote.size(kvKeyOf(kv, prompt)), "a consumed object stayed in redis");
        }
    }

    /** The manifest key of the request's first chunk, as the connector names it. */
    private static String kvKeyOf(StoreConnector kv, RequestTokens prompt) {
        return KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(kv.keyContext(), null), 16, 1, prompt).chunks()
                .get(0).manifestKey();
    }

    @Test
    void aTierNamingTheSameServerAndDatabaseTwiceIsRefusedWhateverTheAliasAndOptions() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open(
                "tiered:[redis://127.0.0.1:1][valkey://127.0.0.1:1/0?pool=2]").close());
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("tiers 1 and 2 name the same store"), e.getMessage());
    }
}
