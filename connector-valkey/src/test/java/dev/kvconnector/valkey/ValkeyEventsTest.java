package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEvent.Type;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code valkey://} events from a real redis-server's keyspace notifications: stores, removals, expiries and
 * evictions; a clear warning when the server has them off; a gap after a reconnect.
 */
class ValkeyEventsTest {
    private final List<String> reported = new CopyOnWriteArrayList<>();

    /** Puts {@code probe} until its store is told: the subscription connects in the background. */
    private static List<StoreEvent> awaitSubscribed(KVStore store, LinkedBlockingQueue<StoreEvent> events,
                                                    MemorySegment v, String probe) throws InterruptedException {
        for (int i = 0; i < 100; i++) {
            try {
                store.put(probe, v, PutOptions.DEFAULT);
            } catch (KVException e) {
                // The first call after a server restart finds its pooled connection dead; the next reconnects.
                continue;
            }
            StoreEvent e = events.poll(100, TimeUnit.MILLISECONDS);
            if (e != null) {
                List<StoreEvent> seen = new ArrayList<>(List.of(e));
                events.drainTo(seen);
                return seen;
            }
        }
        throw new AssertionError("no event of " + probe + " within 10 s: is the subscription connected?");
    }

    /** The next event of {@code key}, skipping others (probes), within 10 s. */
    private static StoreEvent nextOf(LinkedBlockingQueue<StoreEvent> events, String key) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < end) {
            StoreEvent e = events.poll(100, TimeUnit.MILLISECONDS);
            if (e != null && e.key().equals(key)) {
                return e;
            }
        }
        throw new AssertionError("no event of " + key + " within 10 s");
    }

    @Test
    void keyspaceNotificationsAreToldAsStoresRemovalsExpiriesAndEvictions() throws Exception {
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        try (RedisServerProcess server = RedisServerProcess.start("--notify-keyspace-events", "KEA",
                "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru");
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "/3?pool=2");
             Arena arena = Arena.ofConfined()) {
            assertTrue(store.capabilities().contains(StoreCapability.EVENTS));
            MemorySegment v = Segments.random(arena, 64 << 10, '*', 1);
            StoreSubscription sub = store.subscribe(events::add, (w, f) -> reported.add(w + ": " + f));
            awaitSubscribed(store, events, v, "probe");

            store.put("k", v, PutOptions.DEFAULT);
            assertEvent(nextOf(events, "k"), Type.STORED, store.uri());
            assertTrue(store.remove("k"));
            assertEvent(nextOf(events, "k"), Type.REMOVED, store.uri());
            store.put("t", v, PutOptions.DEFAULT.withTtlMillis(50));
            assertEvent(nextOf(events, "t"), Type.STORED, store.uri());
            assertEvent(nextOf(events, "t"), Type.EXPIRED, store.uri());
            for (int i = 0; i < 200; i++) {
                store.put("fill-" + i, v, PutOptions.DEFAULT);
            }
            boolean evicted = false;
            for (StoreEvent e = events.poll(5, TimeUnit.SECONDS); e != null && !evicted;
                 e = events.poll(2, TimeUnit.SECONDS)) {
                evicted = e.type() == Type.EVICTED && e.key().startsWith("fill-");
            }
            assertTrue(evicted, "12.8 MB into a 4 MB allkeys-lru server told no eviction");
            sub.close();
        }
        assertEquals(List.of(), reported);
    }

    private static void assertEvent(StoreEvent e, Type type, String uri) {
        assertEquals(type, e.type(), e.toString());
        assertEquals(uri, e.storeUri(), e.toString());
        assertEquals(-1, e.bytes(), "the server does not tell sizes: " + e);
    }

    @Test
    void aServerWithNotificationsOffIsWarnedAboutNamingItAndTheConfigSetAndEventsFlowOnceTurnedOn()
            throws Exception {
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        PrintStream old = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try (RedisServerProcess server = RedisServerProcess.start();
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?pool=2");
             Arena arena = Arena.ofConfined()) {
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            try (StoreSubscription sub = store.subscribe(events::add, (w, f) -> reported.add(w + ": " + f))) {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (!err.toString(StandardCharsets.UTF_8).contains("notify-keyspace-events")
                        && System.nanoTime() < end) {
                    Thread.sleep(20);
                }
                System.setErr(old);
                String log = err.toString(StandardCharsets.UTF_8);
                String line = log.lines().filter(l -> l.contains("notify-keyspace-events")).findFirst().orElse(log);
                assertTrue(line.contains("WARN") && line.contains(server.hostPort()) && line.contains(
                        "CONFIG SET notify-keyspace-events KEA") && line.contains("hear of no store, removal"), line);
                MemorySegment v = Segments.random(arena, 100, '*', 2);
                store.put("before", v, PutOptions.DEFAULT);
                assertNull(events.poll(300, TimeUnit.MILLISECONDS), "an event came with notifications off");

                assertEquals("+OK", server.command("CONFIG", "SET", "notify-keyspace-events", "KEA"));

                awaitSubscribed(store, events, v, "after");
            }
        } finally {
            System.setErr(old);
        }
        assertEquals(List.of(), reported);
    }

    @Test
    void aServerThatRestartsIsReportedReconnectedAndLeavesAGapInTheNumbers() throws Exception {
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        try (RedisServerProcess server = RedisServerProcess.start("--notify-keyspace-events", "KEA");
             KVStore store = KVStores.open("valkey://" + server.hostPort() + "?pool=2&timeout=2s");
             Arena arena = Arena.ofConfined();
             StoreSubscription sub = store.subscribe(events::add, (w, f) -> reported.add(w + ": " + f))) {
            MemorySegment v = Segments.random(arena, 100, '*', 3);
            List<StoreEvent> before = awaitSubscribed(store, events, v, "one");
            server.restart();
            server.command("CONFIG", "SET", "notify-keyspace-events", "KEA");

            List<StoreEvent> after = awaitSubscribed(store, events, v, "two");

            StoreEvent last = before.get(before.size() - 1);
            StoreEvent first = after.get(0);
            assertNotNull(first);
            assertTrue(!last.isFollowedBy(first), "no gap across the reconnect: " + last + " then " + first);
            assertEquals(last.epoch(), first.epoch());
            assertEquals(1, reported.size(), reported.toString());
            assertTrue(reported.get(0).contains(server.hostPort()) && reported.get(0).contains("reconnecting"),
                    reported.get(0));
        }
    }

    @Test
    void theWarningNamesWhatIsMissing() {
        assertNull(ValkeySubscription.missingFlagsWarning("h:1", "AKE", "valkey://h:1"));
        assertNull(ValkeySubscription.missingFlagsWarning("h:1", "Eg$xe", "valkey://h:1"));
        String partial = ValkeySubscription.missingFlagsWarning("h:1", "Ex", "valkey://h:1");
        assertTrue(partial.contains("without 'g$e'") && partial.contains("no removals, stores, evictions")
                && partial.contains("CONFIG SET notify-keyspace-events KEA on h:1"), partial);
        String refused = ValkeySubscription.missingFlagsWarning("h:1", null, "valkey://h:1");
        assertTrue(refused.contains("refused CONFIG GET notify-keyspace-events"), refused);
    }
}
