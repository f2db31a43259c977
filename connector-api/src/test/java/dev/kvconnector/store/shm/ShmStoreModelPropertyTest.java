package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Random sequences of puts, removes and gets on a small store that must evict constantly, checked against a map
 * of the latest value per key: a hit always returns the latest value put under that key, whole; and once every
 * key is removed, every block is free again.
 */
class ShmStoreModelPropertyTest {
    record Op(int kind, int key, int size) {
    }

    @Provide
    Arbitrary<List<Op>> ops() {
        Arbitrary<Op> op = Combinators.combine(Arbitraries.integers().between(0, 9), Arbitraries.integers()
                .between(0, 39), Arbitraries.integers().between(2, 3000)).as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(400);
    }

    @Property(tries = 60)
    void hitsAreAlwaysTheLatestWholeValueAndNoSpaceLeaks(@ForAll("ops") List<Op> ops) throws IOException {
        Path dir = ShmTestFiles.newDir();
        try (ShmStore s = ShmStore.open(StoreUri.parse("shm:/model?capacity=64KiB&block=512&entries=16&dir=" + dir));
             Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(3000 * 8, 8);
            Map<Integer, Long> latest = new HashMap<>();
            long seed = 0;
            for (Op op : ops) {
                String key = "k" + op.key();
                if (op.kind() < 5) {
                    long len = op.size() * 8L;
                    ValuePattern.fill(buf, len, ++seed);
                    assertTrue(s.put(key, buf.asSlice(0, len), PutOptions.DEFAULT));
                    latest.put(op.key(), seed);
                } else if (op.kind() < 7) {
                    s.remove(key);
                    latest.remove(op.key());
                } else {
                    long r = s.getInto(key, buf);
                    if (GetResult.isHit(r)) {
                        assertNull(ValuePattern.verify(buf, r), key);
                        assertEquals(latest.get(op.key()), ValuePattern.seed(buf), key + " is not the latest value");
                    } else {
                        assertTrue(GetResult.isMiss(r), GetResult.describe(r));
                    }
                }
            }
            for (int k = 0; k < 40; k++) {
                s.remove("k" + k);
            }
            assertEquals(0, s.liveEntries());
            assertEquals(64 << 10, s.freeBytes());
        } finally {
            ShmTestFiles.delete(dir);
        }
    }
}
