package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.valkey.testing.RedisCluster;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** {@code valkey+cluster://} against a real 3-master cluster built with {@code redis-cli --cluster create}. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValkeyClusterTest {
    private RedisCluster cluster;
    private List<RedisServerProcess> nodes;

    @BeforeAll
    void startCluster() {
        cluster = RedisCluster.start(3);
        nodes = cluster.nodes();
    }

    @AfterAll
    void stopCluster() {
        if (cluster != null) {
            cluster.close();
        }
    }

    private String uri() {
        return "valkey+cluster://" + nodes.get(0).hostPort() + "?pool=2";
    }

    private RedisServerProcess nodeOfSlot(int slot) throws Exception {
        String slots = RedisCluster.cli(nodes.get(0), "cluster", "slots");
        String[] lines = slots.split("\n");
        for (int i = 0; i + 3 < lines.length; i++) {
            // redis-cli prints each range as: first, last, host, port, id (one per line).
            try {
                int first = Integer.parseInt(lines[i].trim());
                int last = Integer.parseInt(lines[i + 1].trim());
                int port = Integer.parseInt(lines[i + 3].trim());
                if (slot >= first && slot <= last) {
                    for (RedisServerProcess n : nodes) {
                        if (n.port() == port) {
                            return n;
                        }
                    }
                }
            } catch (NumberFormatException notARange) {
                // Not the start of a range.
            }
        }
        throw new IllegalStateException("no owner of slot " + slot + " in " + slots);
    }

    @Test
    void keysSpreadOverAllMastersAndRoundTrip() throws Exception {
        try (KVStore store = KVStores.open(uri()); Arena arena = Arena.ofConfined()) {
            Set<Integer> owners = new HashSet<>();
            for (int i = 0; i < 60; i++) {
                String k = "spread:" + i;
                MemorySegment v = Segments.random(arena, 1000 + i, "+-:$*%_,#!=(|~>".charAt(i % 15), i);
                assertTrue(store.put(k, v, PutOptions.DEFAULT));
                MemorySegment dst = Segments.zeroed(arena, v.byteSize());
                assertEquals(v.byteSize(), store.getInto(k, dst));
                assertEquals(-1, Segments.mismatch(v, dst, v.byteSize()));
                assertEquals(v.byteSize(), store.size(k));
                owners.add(nodeOfSlot(ClusterSlots.slot(k)).port());
            }
            assertEquals(3, owners.size(), "60 keys land on all 3 masters");
            assertTrue(store.remove("spread:0"));
            assertFalse(store.exists("spread:0"));
            assertEquals(GetResult.MISS, store.getInto("spread:never", Segments.zeroed(arena, 8)));
            assertTrue(store.healthCheck().contains("mode cluster"), store.healthCheck());
        }
    }

    @Test
    void slotsMatchTheServersKeyslot() throws Exception {
        for (String k : new String[] {"a", "foo", "{req-42}:L07", "{req-42}:L31", "x{}y", "{}{a}", "路径/键",
                "model@1@0@abc"}) {
            String reply = nodes.get(0).command("CLUSTER", "KEYSLOT", k);
            assertEquals(":" + ClusterSlots.slot(k), reply, k);
        }
        assertEquals(ClusterSlots.slot("{req-42}:L07"), ClusterSlots.slot("{req-42}:L31"));
    }

    @Test
    void batchesAcrossMastersReturnPerKeyResults() {
        try (KVStore store = KVStores.open(uri()); Arena arena = Arena.ofConfined()) {
            int n = 12;
            String[] keys = new String[n];
            MemorySegment[] values = new MemorySegment[n];
            MemorySegment[] dsts = new MemorySegment[n];
            for (int i = 0; i < n; i++) {
                keys[i] = i % 2 == 0 ? "{chunk-7}:L" + i : "free:" + i;
                values[i] = Segments.random(arena, 20_000 + i, '*', i);
                dsts[i] = Segments.zeroed(arena, 20_000 + i);
            }
            boolean[] stored = new boolean[n];
            store.putBatch(keys, values, n, PutOptions.DEFAULT, stored);
            long[] results = new long[n];
            store.getIntoBatch(keys, dsts, n, results);
            String[] tagged = {keys[0], keys[2], keys[4], "{chunk-7}:absent"};
            long[] taggedResults = new long[4];
            store.getIntoBatch(tagged, new MemorySegment[] {dsts[0], dsts[2], Segments.zeroed(arena, 10),
                    dsts[6]}, 4, taggedResults);
            assertEquals(20_000, taggedResults[0]);
            assertEquals(GetResult.tooSmall(20_004), taggedResults[2], "one master, one pipeline, per-key codes");
            assertEquals(GetResult.MISS, taggedResults[3]);
            for (int i = 0; i < n; i++) {
                assertTrue(stored[i]);
                assertEquals(20_000 + i, results[i]);
                assertEquals(-1, Segments.mismatch(values[i], dsts[i], 20_000 + i));
            }
            assertEquals(n, store.removeBatch(keys, n));
        }
    }

    /**
     * Marks {@code slot} migrating from {@code source} to {@code target} and moves {@code key}; returns the target's
     * node id.
     */
    private static String startMigrating(int slot, RedisServerProcess source, RedisServerProcess target, String key)
            throws Exception {
        String sourceId = RedisCluster.cli(source, "CLUSTER", "MYID");
        String targetId = RedisCluster.cli(target, "CLUSTER", "MYID");
        assertEquals("+OK", target.command("CLUSTER", "SETSLOT", Integer.toString(slot), "IMPORTING", sourceId));
        assertEquals("+OK", source.command("CLUSTER", "SETSLOT", Integer.toString(slot), "MIGRATING", targetId));
        assertEquals("+OK", source.command("MIGRATE", "127.0.0.1", Integer.toString(target.port()), "", "0",
                "5000", "KEYS", key));
        return targetId;
    }

    /** Moves the slot's last key, {@code last}, and gives the slot to the target on both nodes. */
    private static void finishMigrating(int slot, RedisServerProcess source, RedisServerProcess target,
                                        String targetId, String last) throws Exception {
        assertEquals("+OK", source.command("MIGRATE", "127.0.0.1", Integer.toString(target.port()), "", "0",
                "5000", "KEYS", last));
        for (RedisServerProcess n : List.of(target, source)) {
            assertEquals("+OK", n.command("CLUSTER", "SETSLOT", Integer.toString(slot), "NODE", targetId));
        }
    }

    @Test
    void movedAndAskRedirectsAreFollowedWhileASlotMigrates() throws Exception {
        try (KVStore store = KVStores.open(uri()); Arena arena = Arena.ofConfined()) {
            String key = "{migrate}:k";
            String stays = "{migrate}:stays";
            int slot = ClusterSlots.slot(key);
            RedisServerProcess source = nodeOfSlot(slot);
            RedisServerProcess target = nodes.stream().filter(n -> n != source).findFirst().orElseThrow();
            MemorySegment v = Segments.random(arena, 5000, '>', 1);
            assertTrue(store.put(key, v, PutOptions.DEFAULT));
            assertTrue(store.put(stays, v, PutOptions.DEFAULT));
            String targetId = startMigrating(slot, source, target, key);
            // The key moved but the slot is still the source's: the source answers ASK for it.
            assertTrue(source.command("GET", key).startsWith("-ASK " + slot), "the source redirects with ASK");
            MemorySegment dst = Segments.zeroed(arena, 5000);
            assertEquals(5000, store.getInto(key, dst), "followed ASK to the importing node");
            assertEquals(-1, Segments.mismatch(v, dst, 5000));
            assertEquals(5000, store.size(stays), "keys not yet migrated are still served by the source");
            long[] results = new long[2];
            store.getIntoBatch(new String[] {key, stays}, new MemorySegment[] {Segments.zeroed(arena, 5000),
                    Segments.zeroed(arena, 5000)}, 2, results);
            assertEquals(5000, results[0], "a batch follows ASK for the migrated key");
            assertEquals(5000, results[1]);
            finishMigrating(slot, source, target, targetId, stays);
            // The store's slot map still names the source: it answers MOVED; a batch puts the redirected keys again
            // one by one, and the store reloads the map.
            assertTrue(source.command("GET", key).startsWith("-MOVED " + slot), "the source redirects with MOVED");
            boolean[] stored = new boolean[2];
            store.putBatch(new String[] {key, stays}, new MemorySegment[] {v, v.asSlice(0, 7)}, 2,
                    PutOptions.DEFAULT, stored);
            assertTrue(stored[0] && stored[1]);
            assertEquals(7, store.size(stays));
            assertEquals(5000, store.getInto(key, Segments.zeroed(arena, 5000)));
            assertTrue(store.put(key, v.asSlice(0, 10), PutOptions.DEFAULT));
            assertEquals(10, store.size(key));
            assertEquals(":1", target.command("EXISTS", key), "the value lives on the new owner");
        }
    }

    @Test
    void aPipelinedReadGoesToTheKeysMasterAndFollowsTheRedirectsOfASlotThatMigrates() throws Exception {
        try (KVStore store = KVStores.open(uri()); Arena arena = Arena.ofConfined()) {
            String key = "{pipelined}:k";
            String stays = "{pipelined}:stays";
            int slot = ClusterSlots.slot(key);
            RedisServerProcess source = nodeOfSlot(slot);
            RedisServerProcess target = nodes.stream().filter(n -> n != source).findFirst().orElseThrow();
            MemorySegment v = Segments.random(arena, 5000, '<', 2);
            assertTrue(store.put(key, v, PutOptions.DEFAULT));
            assertTrue(store.put(stays, v, PutOptions.DEFAULT));
            StoreRead read = store.newRead();
            MemorySegment[] dsts = {Segments.zeroed(arena, 5000), Segments.zeroed(arena, 5000)};
            long[] results = new long[2];
            store.sendGetIntoBatch(new String[] {key, stays}, dsts, 2, read);
            read.await(results);
            assertEquals(5000, results[0]);
            assertEquals(5000, results[1]);

            String targetId = startMigrating(slot, source, target, key);
            dsts[0].fill((byte) 0);
            store.sendGetIntoBatch(new String[] {key, stays}, dsts, 2, read);
            read.await(results);

            assertEquals(5000, results[0], "the source answered ASK for the migrated key, and it was followed");
            assertEquals(-1, Segments.mismatch(v, dsts[0], 5000));
            assertEquals(5000, results[1], "the key that stayed came with the batch");
            finishMigrating(slot, source, target, targetId, stays);
        }
    }

    @Test
    void aClusterDoesNotSubscribeToKeyspaceNotificationsAndSaysWhatToDoInstead() {
        try (KVStore store = KVStores.open(uri())) {
            assertFalse(store.capabilities().contains(StoreCapability.EVENTS));
            KVException e = assertThrows(KVException.class, () -> store.subscribe(ev -> { }, ErrorHandler.LOGGING));
            assertEquals(ErrorCode.UNSUPPORTED, e.code());
            assertTrue(e.getMessage().contains("per node") && e.hint().contains("valkey://host:port"),
                    e.getMessage() + " / " + e.hint());
        }
    }
}
