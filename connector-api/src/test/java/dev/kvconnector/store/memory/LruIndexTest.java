package dev.kvconnector.store.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

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

    @Test
    void putReplaceTouchAndRemoveKeepTheLeastRecentlyUsedOrder() {
        LruIndex<V> index = new LruIndex<>();
        V a = new V(1);
        V b = new V(2);
        V c = new V(3);
        assertNull(index.put("a", a));
        assertNull(index.put("b", b));
        assertNull(index.put("c", c));
        assertEquals(List.of(a, b, c), order(index));
        index.touch(a);
        assertEquals(List.of(b, c, a), order(index));
        V b2 = new V(4);
        assertSame(b, index.put("b", b2), "a put of a held key returns the value it replaced");
        assertEquals(List.of(c, a, b2), order(index));
        assertSame(a, index.remove("a"));
        assertNull(index.remove("a"));
        assertEquals(List.of(c, b2), order(index));
        index.remove(c);
        assertEquals(List.of(b2), order(index));
        assertSame(b2, index.eldest());
        assertEquals(1, index.size());
    }

    @Test
    void agreesWithAnAccessOrderedLinkedHashMapOverRandomOperations() {
        LruIndex<V> index = new LruIndex<>();
        Map<String, V> model = new LinkedHashMap<>(16, 0.75f, true);
        Random random = new Random(7);
        for (int step = 0; step < 50_000; step++) {
            String key = "k" + random.nextInt(64);
            switch (random.nextInt(4)) {
                case 0 -> {
                    V v = new V(step);
                    assertSame(model.put(key, v), index.put(key, v));
                }
                case 1 -> {
                    V held = index.get(key);
                    assertSame(model.get(key), held);
                    if (held != null) {
                        index.touch(held);
                    }
                }
                case 2 -> assertSame(model.remove(key), index.remove(key));
                default -> {
                    V eldest = index.eldest();
                    V modelEldest = model.isEmpty() ? null : model.values().iterator().next();
                    assertSame(modelEldest, eldest);
                    if (eldest != null) {
                        index.remove(eldest);
                        model.remove(model.keySet().iterator().next());
                    }
                }
            }
            assertEquals(model.size(), index.size());
        }
        assertEquals(new ArrayList<>(model.values()), order(index));
        List<V> drained = new ArrayList<>();
        index.drainTo(drained);
        assertEquals(new ArrayList<>(model.values()), drained);
        assertEquals(0, index.size());
        assertNull(index.eldest());
    }
}
