package dev.kvconnector.store.tiered;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.store.memory.MemoryStore;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What a tier that fails does to a tiered store's calls (issue 21): a lower tier that is down never fails a call the
 * first tier serves; its removals are retried and hide the key below meanwhile; a read no tier serves answers what
 * the lowest tier answered; every absorbed failure is counted and reported to the error handler.
 */
class TieredFailuresTest {
    private final Arena arena = Arena.ofShared();
    private final List<String> reported = new CopyOnWriteArrayList<>();
    private TieredStore store;

    @AfterEach
    void close() {
        if (store != null) {
            store.close();
        }
        arena.close();
    }

    private void awaitReports(int n) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (reported.size() < n && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(n, reported.size(), reported.toString());
    }

    private TieredStore tiered(TieredOptions options, KVStore... tiers) {
        store = TieredStore.over(List.of(tiers), options);
        store.errorHandler((where, failure) -> reported.add(where + ": " + failure.getMessage()));
        return store;
    }

    @Test
    void aConsumingRemovalWhileTheLowerTierIsDownSucceedsHidesTheKeyBelowAndIsRetriedOnceItIsBack()
            throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);
        MemorySegment v = Segments.random(arena, 700, 1);
        store.put("k", v, PutOptions.DEFAULT);
        store.put("other", v, PutOptions.DEFAULT);
        remote.down(true);

        assertEquals(1, store.removeConsumed(new String[] {"k", "other"}, 1));

        assertFalse(local.exists("k"));
        assertTrue(remote.inner().exists("k"), "a reader of the remote alone still sees it until the retry lands");
        assertEquals(GetResult.MISS, store.getInto("k", arena.allocate(700)), "the removed key was read below");
        assertEquals(-1, store.size("k"));
        StoreView view = store.newView();
        assertEquals(GetResult.MISS, store.tryView("k", view));
        assertEquals(1, store.writeBackStats().removals());
        assertEquals(1, store.tierStats().get(1).queued());
        // The consumed object leaves the lower tier from the write-back queue: its first failure is reported there.
        awaitReports(1);
        assertTrue(reported.get(0).contains("removal of k") && reported.get(0).contains("tier 2 (faulty:memory:")
                && reported.get(0).contains("retrying"), reported.get(0));

        remote.down(false);
        assertTrue(store.flush(10_000), store.writeBackStats().toString());
        assertFalse(remote.inner().exists("k"), "the retried removal did not reach the remote");
        assertTrue(remote.inner().exists("other"));
        assertEquals(1, store.writeBackStats().removed());
        assertEquals(0, store.writeBackStats().removals());
        assertTrue(store.tierStats().get(1).errors() >= 1);
    }

    @Test
    void aFailureOfTheFirstTierFailsTheRemovalNamingItAndTheLowerTiersStillRemove() {
        FaultyTier local = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        tiered(TieredOptions.DEFAULT, local, remote);
        store.put("k", Segments.random(arena, 100, 2), PutOptions.DEFAULT);
        local.down(true);

        KVException e = assertThrows(KVException.class, () -> store.remove("k"));

        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("tier 1 of 2 (faulty:memory:"), e.getMessage());
        assertFalse(remote.exists("k"));
    }

    @Test
    void aPutAfterARemovalThatWaitsForTheLowerTierWinsOverIt() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT.withWriteBack(true), local, remote);
        MemorySegment old = Segments.random(arena, 300, 3);
        MemorySegment fresh = Segments.random(arena, 300, 4);
        store.put("k", old, PutOptions.DEFAULT);
        assertTrue(store.flush(10_000));
        remote.down(true);
        assertTrue(store.remove("k"));
        remote.down(false);

        assertTrue(store.put("k", fresh, PutOptions.DEFAULT));
        assertTrue(store.flush(10_000), store.writeBackStats().toString());

        MemorySegment dst = arena.allocate(300);
        assertEquals(300, remote.inner().getInto("k", dst), "the waiting removal outlived the put");
        assertTrue(Segments.equal(fresh, dst, 300), "the lower tier holds the old value");
        assertEquals(0, store.writeBackStats().removals());
    }

    @Test
    void aMissInEveryTierIsTheLowestTiersAnswerAndTheErrorsAboveItAreReported() {
        FaultyTier upper = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        FaultyTier lower = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, upper, lower);
        MemorySegment dst = arena.allocate(64);
        upper.down(true);

        assertEquals(GetResult.MISS, store.getInto("nowhere", dst), "the lowest tier missed: one miss");
        assertEquals(-1, store.size("nowhere"));
        assertEquals(2, reported.size(), reported.toString());
        assertTrue(reported.get(0).contains("tier 1 of 2 (faulty:memory:"), reported.get(0));

        upper.down(false);
        lower.down(true);
        KVException e = assertThrows(KVException.class, () -> store.getInto("nowhere", dst));
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("tier 2 of 2 (faulty:memory:"), e.getMessage());

        upper.down(true);
        KVException both = assertThrows(KVException.class, () -> store.getInto("nowhere", dst));
        assertTrue(both.getMessage().contains("tier 2 of 2"), "not the lowest tier's error: " + both.getMessage());
        assertEquals(3, store.tierStats().get(0).errors());
    }

    @Test
    void aBatchReadAsksEachTierOnceForWhatTheTiersAboveDidNotServe() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);
        String[] keys = {"both", "below", "above", "below2", "nowhere"};
        MemorySegment[] values = new MemorySegment[keys.length];
        for (int i = 0; i < keys.length; i++) {
            values[i] = Segments.random(arena, 100 + i, 60 + i);
        }
        local.put("both", values[0], PutOptions.DEFAULT);
        remote.inner().put("both", Segments.random(arena, 100, 99), PutOptions.DEFAULT);
        remote.inner().put("below", values[1], PutOptions.DEFAULT);
        local.put("above", values[2], PutOptions.DEFAULT);
        remote.inner().put("below2", values[3], PutOptions.DEFAULT);
        MemorySegment[] dsts = new MemorySegment[keys.length];
        for (int i = 0; i < keys.length; i++) {
            dsts[i] = arena.allocate(256);
        }
        long[] results = new long[keys.length];

        store.getIntoBatch(keys, dsts, keys.length, results);

        for (int i = 0; i < 4; i++) {
            assertEquals(values[i].byteSize(), results[i], keys[i]);
            assertTrue(Segments.equal(values[i], dsts[i], values[i].byteSize()), keys[i] + ": not its own bytes");
        }
        assertEquals(GetResult.MISS, results[4]);
        assertEquals(1, remote.batchReads.get(), "the lower tier is read once, for the three keys above it missed");
        assertEquals(0, remote.reads.get());
        assertTrue(local.exists("below") && local.exists("below2"), "hits below are promoted");
        assertEquals(2, store.tierStats().get(0).hits());
        assertEquals(2, store.tierStats().get(1).hits());
    }

    @Test
    void aBatchReadThatNoTierServesAnswersTheLowestTiersErrorAndOneTheFirstTierServesNeverAsksBelow() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);
        MemorySegment v = Segments.random(arena, 64, 7);
        local.put("here", v, PutOptions.DEFAULT);
        remote.down(true);
        MemorySegment[] dsts = {arena.allocate(64), arena.allocate(64)};
        long[] results = new long[2];

        store.getIntoBatch(new String[] {"here"}, dsts, 1, results);
        assertEquals(64, results[0]);
        assertEquals(0, remote.batchReads.get(), "a batch the first tier served asked the tier below");

        KVException e = assertThrows(KVException.class,
                () -> store.getIntoBatch(new String[] {"here", "gone"}, dsts, 2, results));
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("tier 2 of 2 (faulty:memory:"), e.getMessage());
    }

    @Test
    void aWriteThroughPutThatALowerTierFailsNamesTheTierAndTheWriteMode() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);
        remote.down(true);

        KVException e = assertThrows(KVException.class, () -> store.put("k", Segments.random(arena, 10, 5),
                PutOptions.DEFAULT));

        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("tier 2 of 2 (faulty:memory:") && e.getMessage().contains(
                "failed the write-through put") && e.getMessage().contains("tiers 1 to 1 hold the value"),
                e.getMessage());
        assertTrue(e.hint().contains("write=through acknowledges a put once every tier holds it"), e.hint());
        assertEquals("k", e.key());
        assertTrue(local.exists("k"));
    }

    @Test
    void aFullQueueCountsADropAgainstEachTierItWasFor() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier middle = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        FaultyTier bottom = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(new TieredOptions(true, true, 1, true, 1, 5_000, 1 << 20), local, middle, bottom);
        MemorySegment v = Segments.random(arena, 50, 6);
        middle.closeGate();
        store.put("a", v, PutOptions.DEFAULT);
        while (middle.arrived.get() == 0) {
            Thread.onSpinWait();
        }
        store.put("b", v, PutOptions.DEFAULT);
        store.put("c", v, PutOptions.DEFAULT);
        middle.openGate();
        assertTrue(store.flush(10_000));

        assertEquals(1, store.tierStats().get(1).dropped());
        assertEquals(1, store.tierStats().get(2).dropped());
        assertEquals(0, store.tierStats().get(0).dropped());
        assertTrue(reported.stream().anyMatch(r -> r.contains("dropped the oldest, the write-back of b")),
                reported.toString());
        assertFalse(bottom.inner().exists("b"));
        assertTrue(bottom.inner().exists("c"));
    }
}
