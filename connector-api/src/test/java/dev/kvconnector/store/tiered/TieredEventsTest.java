package dev.kvconnector.store.tiered;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEvent.Type;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.memory.MemoryStore;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The events of a tiered store: each tier's, naming it, and a removal from the whole store once no tier holds it. */
class TieredEventsTest {
    @TempDir
    Path dir;

    private String shm(String name) {
        return "shm:/" + name + "?capacity=8MiB&dir=" + dir;
    }

    private static StoreEvent next(LinkedBlockingQueue<StoreEvent> events) throws InterruptedException {
        StoreEvent e = events.poll(10, TimeUnit.SECONDS);
        assertNotNull(e, "no event within 10 s");
        return e;
    }

    private static void assertEvent(StoreEvent e, Type type, String storeUri, String key) {
        assertEquals(type, e.type(), e.toString());
        assertEquals(storeUri, e.storeUri(), e.toString());
        assertEquals(key, e.key(), e.toString());
    }

    @Test
    void eachTierTellsItsOwnEventsAndALastRemovalIsToldForTheWholeStore() throws Exception {
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        try (TieredStore store = (TieredStore) KVStores.open("tiered:[" + shm("a") + "][" + shm("b") + "]");
             KVStore a = KVStores.open(shm("a"));
             KVStore b = KVStores.open(shm("b"));
             Arena arena = Arena.ofConfined();
             StoreSubscription sub = store.subscribe(events::add, (w, f) -> failures.add(f))) {
            assertTrue(store.capabilities().contains(StoreCapability.EVENTS));
            store.put("k", Segments.random(arena, 500, 1), PutOptions.DEFAULT);
            List<StoreEvent> stored = List.of(next(events), next(events), next(events));
            // The put is told through the store at once; each tier's own come from its own thread, in either order.
            assertEvent(stored.get(0), Type.STORED, store.uri(), "k");
            assertEquals(500, stored.get(0).bytes());
            int ofA = stored.get(1).storeUri().equals(a.uri()) ? 1 : 2;
            assertEvent(stored.get(ofA), Type.STORED, a.uri(), "k");
            assertEvent(stored.get(3 - ofA), Type.STORED, b.uri(), "k");

            assertTrue(a.remove("k"));
            assertEvent(next(events), Type.REMOVED, a.uri(), "k");
            assertNull(events.poll(300, TimeUnit.MILLISECONDS), "told gone from the store while tier 2 holds it");

            assertTrue(b.remove("k"));
            StoreEvent tier = next(events);
            StoreEvent whole = next(events);
            assertEvent(tier, Type.REMOVED, b.uri(), "k");
            assertEvent(whole, Type.REMOVED, store.uri(), "k");
            List<StoreEvent> all = new ArrayList<>(stored);
            for (int i = 1; i < all.size(); i++) {
                assertTrue(all.get(i - 1).isFollowedBy(all.get(i)), all.toString());
            }
            assertTrue(tier.isFollowedBy(whole));
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void aRemovalThroughTheStoreIsToldForTheWholeStoreWhateverTheTiersTellAndWhenever() throws Exception {
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        try (TieredStore store = (TieredStore) KVStores.open("tiered:[memory:][" + shm("c") + "]?write=back");
             Arena arena = Arena.ofConfined();
             StoreSubscription sub = store.subscribe(events::add, (w, f) -> { })) {
            store.put("k", Segments.random(arena, 100, 2), PutOptions.DEFAULT);
            assertTrue(store.remove("k"));

            StoreEvent e;
            do {
                e = next(events);
            } while (e.type() != Type.REMOVED || !e.storeUri().equals(store.uri()));
            assertEquals("k", e.key());
        }
    }

    @Test
    void aStoreWhoseTiersTellNothingDeclaresNoEvents() {
        try (TieredStore store = TieredStore.over(List.of(MemoryStore.withCapacity(1 << 20),
                MemoryStore.withCapacity(1 << 20)), TieredOptions.DEFAULT)) {
            assertTrue(!store.capabilities().contains(StoreCapability.EVENTS));
        }
    }
}
