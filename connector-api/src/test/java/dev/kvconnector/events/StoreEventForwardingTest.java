package dev.kvconnector.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.shm.ShmStore;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A connector over a store that tells its events ({@code shm:}) passes on to its listener what left the store:
 * evictions, expiries and removals of its chunks' objects by anyone, once per chunk, with the store's reason; its
 * own consumption once, as consumed; and a gap in the store's events as a gap in its own numbers.
 */
class StoreEventForwardingTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int CHUNK = 16;
    private static final int TOKENS = 40;
    private static final BlockTable TABLE = new BlockTable(new int[] {0, 1, 2}, 16, TOKENS);

    @TempDir
    Path dir;

    private static RequestTokens prompt(int seed) {
        return RequestTokens.of(IntStream.range(0, TOKENS).map(i -> seed + i).toArray());
    }

    private String uri(String options) {
        return "shm:/fwd?dir=" + dir + "&" + options;
    }

    private static List<ChunkKeys> chunks(StoreConnector kv, int seed) {
        return KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(kv.keyContext(), null), CHUNK, LAYOUT.numLayers(),
                prompt(seed)).chunks();
    }

    private static void insert(StoreConnector kv, PagedKVCache source, int seed) {
        try (InsertSession s = kv.beginInsert(prompt(seed))) {
            s.putLayers(LayerSource.paged(source, TABLE));
            s.commit();
        }
    }

    /** The next event that is not a Stored, within 10 s. */
    private static KvEvent nextRemoval(LinkedBlockingQueue<KvEvent> events) throws InterruptedException {
        while (true) {
            KvEvent e = events.poll(10, TimeUnit.SECONDS);
            assertNotNull(e, "no event within 10 s");
            if (!(e instanceof KvEvent.Stored)) {
                return e;
            }
        }
    }

    @Test
    void removalsAndEvictionsOfAChunksObjectsByAnyoneAreToldOncePerChunkWithTheirReason() throws Exception {
        LinkedBlockingQueue<KvEvent> events = new LinkedBlockingQueue<>();
        try (KVStore store = KVStores.open(uri("capacity=16MiB"));
             KVStore other = KVStores.open(uri("capacity=16MiB"));
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK).modelId("m")
                     .events(events::add).build();
             Arena arena = Arena.ofConfined()) {
            insert(kv, source, 5);
            List<ChunkKeys> c = chunks(kv, 5);

            assertTrue(other.remove(c.get(0).layerKeys()[3]));
            assertTrue(other.remove(c.get(0).layerKeys()[4]));
            KvEvent.Removed removed = assertInstanceOf(KvEvent.Removed.class, nextRemoval(events));
            assertEquals(RemovalReason.REMOVED, removed.reason());
            assertEquals(c.get(0).hashHex(), removed.chunkHash());
            assertEquals(store.uri(), removed.storeUri());

            MemorySegment big = arena.allocate((16 << 20) - 4096);
            other.put("filler", big, PutOptions.DEFAULT);
            Map<String, RemovalReason> told = new HashMap<>();
            while (told.size() < 2) {
                KvEvent.Removed r = assertInstanceOf(KvEvent.Removed.class, nextRemoval(events));
                assertEquals(null, told.put(r.chunkHash(), r.reason()), "told twice: " + r);
            }
            assertEquals(Map.of(c.get(1).hashHex(), RemovalReason.EVICTED, c.get(2).hashHex(), RemovalReason.EVICTED),
                    told);
        }
    }

    @Test
    void anExpiryIsToldAsExpired() throws Exception {
        LinkedBlockingQueue<KvEvent> events = new LinkedBlockingQueue<>();
        try (KVStore store = KVStores.open(uri("capacity=16MiB"));
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK).modelId("m")
                     .ttlMillis(50).events(events::add).build()) {
            insert(kv, source, 7);
            Thread.sleep(150);
            ((ShmStore) store).reclaim();

            List<String> expired = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                KvEvent.Removed r = assertInstanceOf(KvEvent.Removed.class, nextRemoval(events));
                assertEquals(RemovalReason.EXPIRED, r.reason());
                expired.add(r.chunkHash());
            }
            assertEquals(chunks(kv, 7).stream().map(ChunkKeys::hashHex).sorted().toList(),
                    expired.stream().sorted().toList());
        }
    }

    @Test
    void aConsumingDropSelectIsToldOnceAsConsumedAndNotAgainAsTheStoresRemoval() throws Exception {
        LinkedBlockingQueue<KvEvent> events = new LinkedBlockingQueue<>();
        try (KVStore store = KVStores.open(uri("capacity=16MiB"));
             KVStore other = KVStores.open(uri("capacity=16MiB"));
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 3);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK).modelId("m")
                     .dropMode(DropMode.CONSUME).events(events::add).build();
             Arena arena = Arena.ofConfined()) {
            insert(kv, source, 9);
            DropResult hit = kv.dropSelect(prompt(9), DropTarget.paged(target, TABLE));
            assertTrue(hit.isComplete(), hit.toString());
            // A removal by someone else after the consume: once it is told, every earlier store event was handled.
            String marker = "kvc1:{" + "0".repeat(64) + "}:L0";
            other.put(marker, arena.allocate(64), PutOptions.DEFAULT);
            other.remove(marker);

            List<KvEvent.Removed> removals = new ArrayList<>();
            KvEvent.Removed r;
            do {
                r = assertInstanceOf(KvEvent.Removed.class, nextRemoval(events));
                removals.add(r);
            } while (!r.chunkHash().equals("0".repeat(64)));
            assertEquals(4, removals.size(), removals.toString());
            for (int i = 0; i < 3; i++) {
                assertEquals(RemovalReason.CONSUMED, removals.get(i).reason());
            }
            for (int i = 1; i < removals.size(); i++) {
                assertEquals(removals.get(i - 1).sequence() + 1, removals.get(i).sequence(), removals.toString());
            }
        }
    }

    @Test
    void aGapInTheStoresEventsSkipsANumberOfTheConnectorsEvents() throws Exception {
        List<KvEvent> got = new java.util.concurrent.CopyOnWriteArrayList<>();
        CountDownLatch release = new CountDownLatch(1);
        KvEventListener stalling = e -> {
            got.add(e);
            if (e instanceof KvEvent.Removed) {
                try {
                    release.await();
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        try (KVStore store = KVStores.open(uri("capacity=16MiB&entries=8192&events=4KiB"));
             KVStore other = KVStores.open(uri("capacity=16MiB&entries=8192&events=4KiB"));
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK).modelId("m")
                     .events(stalling).build();
             Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(64);
            for (int i = 0; i < 200; i++) {
                String key = "kvc1:{" + String.format("%064x", i) + "}:L0";
                other.put(key, v, PutOptions.DEFAULT);
                other.remove(key);
                if (i == 0) {
                    awaitTrue(() -> !got.isEmpty());
                }
            }
            release.countDown();
            String last = String.format("%064x", 199);
            awaitTrue(() -> got.stream().anyMatch(e -> e instanceof KvEvent.Removed r && r.chunkHash().equals(last)));
            boolean gap = false;
            for (int i = 1; i < got.size(); i++) {
                gap |= got.get(i).sequence() != got.get(i - 1).sequence() + 1;
            }
            assertTrue(gap, "400 store events through a 4 KiB ring to a stalled listener left no gap: " + got.size()
                    + " events");
        }
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out");
            Thread.sleep(5);
        }
    }
}
