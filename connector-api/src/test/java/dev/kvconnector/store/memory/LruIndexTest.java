package dev.kvconnector.store.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.kvconnector.store.StoreKey;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class LruIndexTest {
    private static final class V extends LruIndex.Node<V> {
        final int id;

        V(int id) {
            this.id = id;
        }

        @Override
        public String toString() {
            return "v" + id;
        }
    }

    private static List<V> order(LruIndex<V> index) {
        List<V> out = new ArrayList<>();
        for (V v = index.eldest(); v != null; v = index.newer(v)) {
            out.add(v);
        }
        return out;
    }

    private static StoreKey key(String text) {
        return StoreKey.of(text);
    }

    @Test
    void putReplaceTouchAndRemoveKeepTheLeastRecentlyUsedOrder() {
        LruIndex<V> index = new LruIndex<>();
        V a = new V(1);
        V b = new V(2);
        V c = new V(3);
        assertNull(index.put(key("a"), a));
        assertNull(index.put(key("b"), b));
        assertNull(index.put(key("c"), c));
        assertEquals(List.of(a, b, c), order(index));
        index.touch(a);
        assertEquals(List.of(b, c, a), order(index));
        V b2 = new V(4);
        assertSame(b, index.put(key("b"), b2), "a put of a held key returns the value it replaced");
        assertEquals(List.of(c, a, b2), order(index));
        assertSame(a, index.remove(key("a")));
        assertNull(index.remove(key("a")));
        assertEquals(List.of(c, b2), order(index));
        index.remove(c);
        assertEquals(List.of(b2), order(index));
        assertSame(b2, index.eldest());
        assertEquals(1, index.size());
    }

    @Test
    void theIndexKeepsItsOwnCopyOfEveryKey() {
        LruIndex<V> index = new LruIndex<>();
        StoreKey caller = new StoreKey();
        V a = new V(1);
        V b = new V(2);
        assertNull(index.put(caller.set("a"), a));
        caller.set("refilled");
        assertSame(a, index.get(key("a")), "refilling the caller's key moved the value");
        assertNull(index.get(caller));
        assertSame(a, index.put(key("a"), b));
        // The replaced value is reused for another key, as the store reuses entries: its own key is refilled.
        assertNull(index.put(key("z"), a));
        assertSame(b, index.get(key("a")), "the map still held the replaced value's key object");
        assertSame(a, index.get(key("z")));
        assertEquals("a", b.key.toString());
        assertEquals(List.of(b, a), order(index));
        index.remove(b);
        assertNull(index.get(key("a")));
        assertEquals(1, index.size());
    }

    @Test
    void agreesWithAnAccessOrderedLinkedHashMapOverRandomOperations() {
        LruIndex<V> index = new LruIndex<>();
        Map<String, V> model = new LinkedHashMap<>(16, 0.75f, true);
        Random random = new Random(7);
        // One key refilled step after step, as the store's callers do: the index must keep no reference to it. Values
        // out of the index are reused, as the store reuses entries, so their own keys are refilled too.
        StoreKey bytes = new StoreKey();
        List<V> unused = new ArrayList<>();
        for (int step = 0; step < 50_000; step++) {
            String key = "k" + random.nextInt(64);
            bytes.set(key);
            switch (random.nextInt(4)) {
                case 0 -> {
                    V v = unused.isEmpty() ? new V(step) : unused.removeLast();
                    V old = index.put(bytes, v);
                    assertSame(model.put(key, v), old);
                    if (old != null) {
                        unused.add(old);
                    }
                }
                case 1 -> {
                    V held = index.get(bytes);
                    assertSame(model.get(key), held);
                    if (held != null) {
                        index.touch(held);
                    }
                }
                case 2 -> {
                    V removed = index.remove(bytes);
                    assertSame(model.remove(key), removed);
                    if (removed != null) {
                        unused.add(removed);
                    }
                }
                default -> {
                    V eldest = index.eldest();
                    V modelEldest = model.isEmpty() ? null : model.values().iterator().next();
                    assertSame(modelEldest, eldest);
                    if (eldest != null) {
                        index.remove(eldest);
                        model.remove(model.keySet().iterator().next());
                        unused.add(eldest);
                    }
                }
            }
            assertEquals(model.size(), index.size());
        }
        assertEquals(new ArrayList<>(model.values()), order(index));
        model.forEach((key, v) -> assertEquals(key, v.key.toString(), "a value's own key changed while indexed"));
        List<V> drained = new ArrayList<>();
        index.drainTo(drained);
        assertEquals(new ArrayList<>(model.values()), drained);
        assertEquals(0, index.size());
        assertNull(index.eldest());
    }
}
