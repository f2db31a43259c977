package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
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
 * key is removed, every block is free again. The second property adds claims (committed and aborted) and views
 * held across later operations: a held view's bytes never change, and once every view is released and every key
 * removed, every block is free again.
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

    /** A view held by the property below, with what it must keep showing. */
    record Held(StoreView view, long seed, long len) {
        void check(String when) {
            assertNull(ValuePattern.verify(view.segment(), len), when);
            assertEquals(seed, ValuePattern.seed(view.segment()), when + ": a held view's value changed");
        }
    }

    @Provide
    Arbitrary<List<Op>> claimViewOps() {
        Arbitrary<Op> op = Combinators.combine(Arbitraries.integers().between(0, 11), Arbitraries.integers()
                .between(0, 39), Arbitraries.integers().between(2, 1000)).as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(400);
    }

    @Property(tries = 60)
    void claimsPublishLikePutsAndHeldViewsNeverChangeNorLeakSpace(@ForAll("claimViewOps") List<Op> ops)
            throws IOException {
        Path dir = ShmTestFiles.newDir();
        try (ShmStore s = ShmStore.open(StoreUri.parse("shm:/model?capacity=64KiB&block=512&entries=16&dir=" + dir));
             Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(1000 * 8, 8);
            StoreClaim claim = s.newClaim();
            Deque<Held> held = new ArrayDeque<>();
            Map<Integer, Long> latest = new HashMap<>();
            long seed = 0;
            for (Op op : ops) {
                String key = "k" + op.key();
                long len = op.size() * 8L;
                switch (op.kind()) {
                    case 0, 1, 2 -> {
                        ValuePattern.fill(buf, len, ++seed);
                        try {
                            assertTrue(s.put(key, buf.asSlice(0, len), PutOptions.DEFAULT));
                            latest.put(op.key(), seed);
                        } catch (KVException e) {
                            assertEquals(ErrorCode.STORE_FULL, e.code(), e.getMessage());
                        }
                    }
                    case 3, 4, 5 -> {
                        int code = s.tryClaim(key, len, PutOptions.DEFAULT, claim);
                        if (code == ClaimResult.FULL) {
                            continue;
                        }
                        assertEquals(ClaimResult.CLAIMED, code);
                        ValuePattern.fill(claim.segment(), len, ++seed);
                        if (op.kind() == 5) {
                            claim.abort();
                        } else {
                            assertTrue(claim.commit());
                            latest.put(op.key(), seed);
                        }
                    }
                    case 6 -> {
                        s.remove(key);
                        latest.remove(op.key());
                    }
                    case 7, 8 -> {
                        long r = s.getInto(key, buf);
                        if (GetResult.isHit(r)) {
                            assertNull(ValuePattern.verify(buf, r), key);
                            assertEquals(latest.get(op.key()), ValuePattern.seed(buf), key + " is not the latest");
                        } else {
                            assertTrue(GetResult.isMiss(r), GetResult.describe(r));
                        }
                    }
                    case 9 -> {
                        if (held.size() < 3) {
                            StoreView v = s.newView();
                            long r = s.tryView(key, v);
                            if (GetResult.isHit(r)) {
                                Held h = new Held(v, ValuePattern.seed(v.segment()), r);
                                h.check(key);
                                assertEquals(latest.get(op.key()), h.seed(), key + " is not the latest");
                                held.add(h);
                            }
                        }
                    }
                    case 10 -> {
                        Held h = held.poll();
                        if (h != null) {
                            h.check("before the release");
                            h.view().release();
                        }
                    }
                    default -> held.forEach(h -> h.check("while held"));
                }
            }
            for (Held h : held) {
                h.check("at the end");
                h.view().release();
            }
            for (int k = 0; k < 40; k++) {
                s.remove("k" + k);
            }
            assertEquals(0, s.leasesHeld());
            assertEquals(0, s.liveEntries());
            assertEquals(64 << 10, s.freeBytes());
        } finally {
            ShmTestFiles.delete(dir);
        }
    }
}
