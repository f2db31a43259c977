package dev.kvconnector.store.tiered;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.store.memory.MemoryStore;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** What the tiered store adds to its tiers: order, promotion, write-back, failures, and its handles. */
class TieredStoreTest {
    private final Arena arena = Arena.ofShared();
    private TieredStore store;

    @AfterEach
    void close() {
        if (store != null) {
            store.close();
        }
        arena.close();
    }

    private TieredStore tiered(TieredOptions options, KVStore... tiers) {
        store = TieredStore.over(List.of(tiers), options);
        return store;
    }

    private long read(KVStore s, String key, MemorySegment expected) {
        MemorySegment dst = arena.allocate(Math.max(1, expected.byteSize()));
        long r = s.getInto(key, dst);
        if (GetResult.isHit(r)) {
            assertTrue(Segments.equal(expected, dst, expected.byteSize()), "wrong bytes for " + key);
        }
        return r;
    }

    @Test
    void writeThroughPutsIntoEveryTier() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        tiered(TieredOptions.DEFAULT, local, remote);
        MemorySegment v = Segments.random(arena, 3000, 1);

        assertTrue(store.put("k", v, PutOptions.DEFAULT));

        assertEquals(3000, read(local, "k", v));
        assertEquals(3000, read(remote, "k", v));
        assertEquals(3000, store.tierStats().get(1).bytesWritten());
    }

    @Test
    void aHitBelowIsPromotedIntoTheTiersAboveUnlessPromotionIsOff() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        MemorySegment v = Segments.random(arena, 2000, 2);
        remote.put("k", v, PutOptions.DEFAULT);
        tiered(TieredOptions.DEFAULT, local, remote);

        assertEquals(2000, read(store, "k", v));
        assertEquals(2000, read(local, "k", v), "the hit below was not promoted");
        assertEquals(2000, read(store, "k", v));
        assertEquals(1, store.tierStats().get(0).hits());
        assertEquals(1, store.tierStats().get(0).promotions());
        assertEquals(1, store.tierStats().get(1).hits());
        store.close();

        MemoryStore local2 = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote2 = MemoryStore.withCapacity(1 << 20);
        remote2.put("n", v, PutOptions.DEFAULT);
        tiered(TieredOptions.DEFAULT.withPromoteOnHit(false), local2, remote2);
        assertEquals(2000, read(store, "n", v));
        assertTrue(GetResult.isMiss(local2.getInto("n", arena.allocate(2000))), "promote=never promoted");
    }

    @Test
    void evictionFromTheLocalTierKeepsTheObjectBelow() {
        MemoryStore local = MemoryStore.withCapacity(64 << 10);
        MemoryStore remote = MemoryStore.withCapacity(4 << 20);
        tiered(TieredOptions.DEFAULT.withPromoteOnHit(false), local, remote);
        MemorySegment v = Segments.random(arena, 16 << 10, 3);
        for (int i = 0; i < 32; i++) {
            store.put("k" + i, v, PutOptions.DEFAULT);
        }

        assertTrue(GetResult.isMiss(local.getInto("k0", arena.allocate(16 << 10))), "the local tier kept k0");
        for (int i = 0; i < 32; i++) {
            assertEquals(16 << 10, read(store, "k" + i, v), "k" + i);
        }
        assertTrue(store.tierStats().get(1).hits() > 0);
    }

    @Test
    void writeBackAcknowledgesOnceTheFirstTierHoldsItAndFlushLandsItBelow() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT.withWriteBack(true), local, remote);
        MemorySegment v = Segments.random(arena, 4000, 4);
        remote.closeGate();

        assertTrue(store.put("k", v, PutOptions.DEFAULT));

        assertEquals(4000, read(store, "k", v), "a reader of the tiered store sees the first tier's value");
        assertTrue(GetResult.isMiss(remote.inner().getInto("k", arena.allocate(4000))),
                "a reader of the lower tier alone sees a miss until the write-back lands");
        assertFalse(store.flush(100));
        assertEquals(1, store.writeBackStats().depth());
        remote.openGate();
        assertTrue(store.flush(10_000));
        assertEquals(4000, read(remote.inner(), "k", v));
        assertEquals(1, store.writeBackStats().written());
        assertEquals(0, store.writeBackStats().depth());
    }

    @Test
    void aKeyRemovedWhileItsWriteBackGoesOutIsNeverReadFromTheLowerTier() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT.withWriteBack(true), local, remote);
        MemorySegment v = Segments.random(arena, 4000, 41);
        remote.closeGate();
        assertTrue(store.put("k", v, PutOptions.DEFAULT));
        while (remote.arrived.get() == 0) {
            Thread.onSpinWait();
        }

        assertTrue(store.remove("k"));
        // The write-back going out lands below after the removal passed the lower tier, before its undo.
        remote.inner().put("k", v, PutOptions.DEFAULT);

        assertTrue(GetResult.isMiss(store.getInto("k", arena.allocate(4000))),
                "the tiered store read a removed key from the lower tier that its write-back reached");
        assertFalse(store.exists("k"));
        assertFalse(store.remove("k"), "a second remove found the key its readers no longer see");
        remote.openGate();
        assertTrue(store.flush(10_000));
        assertFalse(remote.inner().exists("k"), "the write-back that went out was not undone");
    }

    @Test
    void aFullWriteBackQueueDropsTheOldestAndCountsIt() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT.withWriteBack(true).withQueue(2, true), local, remote);
        MemorySegment v = Segments.random(arena, 100, 5);
        remote.closeGate();

        for (int i = 0; i < 6; i++) {
            assertTrue(store.put("k" + i, v, PutOptions.DEFAULT));
        }
        WriteBackStats full = store.writeBackStats();
        remote.openGate();
        assertTrue(store.flush(10_000));

        assertTrue(full.dropped() >= 2, "dropped " + full.dropped());
        assertEquals(6, store.writeBackStats().dropped() + store.writeBackStats().written());
        assertEquals(100, read(remote.inner(), "k5", v), "the newest write-back was dropped instead of the oldest");
        for (int i = 0; i < 6; i++) {
            assertEquals(100, read(store, "k" + i, v), "the first tier lost k" + i);
        }
    }

    @Test
    void aRefusingWriteBackQueueFailsThePutAndTheClaimAndStoresNothing() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(new TieredOptions(true, true, 1, false, 1, 5_000, 1 << 20), local, remote);
        MemorySegment v = Segments.random(arena, 100, 6);
        remote.closeGate();
        store.put("a", v, PutOptions.DEFAULT);
        while (remote.arrived.get() == 0) {
            Thread.onSpinWait();
        }
        store.put("b", v, PutOptions.DEFAULT);

        KVException e = assertThrows(KVException.class, () -> store.put("c", v, PutOptions.DEFAULT));
        StoreClaim claim = store.newClaim();
        int claimed = store.tryClaim("d", 100, PutOptions.DEFAULT, claim);
        remote.openGate();

        assertEquals(ErrorCode.STORE_FULL, e.code());
        assertTrue(e.getMessage().contains("write-back queue is full"), e.getMessage());
        assertEquals("c", e.key());
        assertEquals(ClaimResult.FULL, claimed);
        assertFalse(claim.isClaimed());
        assertFalse(local.exists("c"), "a refused put was stored in the first tier");
        assertEquals(2, store.writeBackStats().refused());
    }

    @Test
    void aLowerTierThatIsDownNeverFailsAReadTheFirstTierServesAndNamesItselfOtherwise() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);
        MemorySegment v = Segments.random(arena, 500, 7);
        store.put("both", v, PutOptions.DEFAULT);
        remote.inner().put("below", v, PutOptions.DEFAULT);
        remote.down(true);

        assertEquals(500, read(store, "both", v));
        assertEquals(500, store.size("both"));
        KVException read = assertThrows(KVException.class, () -> store.getInto("below", arena.allocate(500)));
        KVException put = assertThrows(KVException.class, () -> store.put("new", v, PutOptions.DEFAULT));

        for (KVException e : List.of(read, put)) {
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("tier 2 of 2 (faulty:memory:"), e.getMessage());
        }
        assertEquals(500, read(local, "new", v), "write-through keeps the value in the tiers above the failure");
        assertTrue(store.tierStats().get(1).errors() >= 2);
    }

    @Test
    void writeBackToATierThatIsDownRetriesAndLandsOnceItIsBack() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT.withWriteBack(true), local, remote);
        MemorySegment v = Segments.random(arena, 800, 8);
        remote.down(true);

        assertTrue(store.put("k", v, PutOptions.DEFAULT));
        assertEquals(800, read(store, "k", v));
        assertFalse(store.flush(300));
        WriteBackStats failing = store.writeBackStats();
        remote.down(false);
        assertTrue(store.flush(10_000));

        assertTrue(failing.failed() >= 1, failing.toString());
        assertTrue(failing.lastFailure().contains("tier 2 (faulty:memory:"), failing.lastFailure());
        assertEquals(800, read(remote.inner(), "k", v));
    }

    @Test
    void aRemovalCancelsAWaitingWriteBackAndUndoesOneGoingOut() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(new TieredOptions(true, true, 16, true, 1, 5_000, 1 << 20), local, remote);
        MemorySegment v = Segments.random(arena, 100, 9);
        remote.closeGate();
        store.put("going", v, PutOptions.DEFAULT);
        while (remote.arrived.get() == 0) {
            Thread.onSpinWait();
        }
        store.put("waiting", v, PutOptions.DEFAULT);

        assertTrue(store.remove("going"));
        assertTrue(store.removeConsumed(new String[] {"waiting"}, 1) >= 1);
        remote.openGate();
        assertTrue(store.flush(10_000));

        assertFalse(remote.inner().exists("going"), "a write-back going out outlived the removal");
        assertFalse(remote.inner().exists("waiting"), "a waiting write-back outlived the consuming removal");
        assertFalse(store.exists("going"));
    }

    @Test
    void claimsAndViewsOfTheFirstTierAreUsedInPlace() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        tiered(TieredOptions.DEFAULT, local, remote);
        assertTrue(store.capabilities().containsAll(List.of(StoreCapability.CLAIM, StoreCapability.VIEW)));
        MemorySegment v = Segments.random(arena, 1000, 10);
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim("c", 1000, PutOptions.DEFAULT, claim));
        claim.segment().copyFrom(v);
        assertTrue(claim.commit());
        assertEquals(1000, read(remote, "c", v), "write-through of a claim skipped the lower tier");

        StoreView mine = store.newView();
        StoreView theirs = local.newView();
        assertEquals(1000, store.tryView("c", mine));
        assertEquals(1000, local.tryView("c", theirs));
        assertEquals(theirs.segment().address(), mine.segment().address(), "the view is not the first tier's memory");
        assertTrue(Segments.equal(v, mine.segment(), 1000));
        mine.release();
        theirs.release();
    }

    @Test
    void aViewOfAnObjectFoundBelowHoldsAPooledCopyAndPromotesIt() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        MemorySegment v = Segments.random(arena, 1500, 11);
        remote.put("below", v, PutOptions.DEFAULT);
        tiered(TieredOptions.DEFAULT, local, remote);

        StoreView view = store.newView();
        assertEquals(1500, store.tryView("below", view));
        assertTrue(Segments.equal(v, view.segment(), 1500));
        assertTrue(view.segment().isReadOnly());
        view.release();
        assertThrows(KVException.class, view::release);

        assertEquals(1500, read(local, "below", v));
        assertTrue(GetResult.isMiss(store.tryView("nowhere", view)));
        assertFalse(view.isHeld());
    }

    @Test
    void viewsOfObjectsBelowOfGrowingAndShrinkingSizesHoldEachObjectExactly() {
        // A view reads a lower tier once, into a buffer as large as the last object it served, and again when the
        // object is larger: each size change must still give the object's own bytes, and nothing past them.
        MemoryStore local = MemoryStore.withCapacity(4 << 20);
        MemoryStore remote = MemoryStore.withCapacity(4 << 20);
        long[] sizes = {100, 300_000, 300_000, 5, 1 << 20, 70_000};
        MemorySegment[] values = new MemorySegment[sizes.length];
        for (int i = 0; i < sizes.length; i++) {
            values[i] = Segments.random(arena, sizes[i], 40 + i);
            remote.put("k" + i, values[i], PutOptions.DEFAULT);
        }
        tiered(TieredOptions.DEFAULT.withPromoteOnHit(false), local, remote);
        StoreView view = store.newView();
        for (int i = 0; i < sizes.length; i++) {
            assertEquals(sizes[i], store.tryView("k" + i, view), "object " + i);
            assertEquals(sizes[i], view.segment().byteSize(), "object " + i);
            assertTrue(Segments.equal(values[i], view.segment(), sizes[i]), "object " + i);
            view.release();
        }
        assertTrue(GetResult.isMiss(store.tryView("nowhere", view)));
    }

    @Test
    void aPutsTtlAppliesInEveryTier() throws Exception {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        tiered(TieredOptions.DEFAULT, local, remote);
        MemorySegment v = Segments.random(arena, 100, 13);

        store.put("short", v, PutOptions.DEFAULT.withTtlMillis(150));
        store.put("long", v, PutOptions.DEFAULT);
        assertTrue(local.exists("short") && remote.exists("short"));
        Thread.sleep(400);

        assertFalse(local.exists("short"), "the first tier kept an expired object");
        assertFalse(remote.exists("short"), "the second tier kept an expired object");
        assertFalse(store.exists("short"));
        assertTrue(store.exists("long"));
        assertTrue(store.capabilities().contains(StoreCapability.NATIVE_TTL));
    }

    @Test
    void healthCheckNamesEveryTierAndFailsNamingTheOneThatIsDown() {
        MemoryStore local = MemoryStore.withCapacity(1 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(1 << 20));
        tiered(TieredOptions.DEFAULT, local, remote);

        String ok = store.healthCheck();
        remote.down(true);
        KVException down = assertThrows(KVException.class, store::healthCheck);

        assertTrue(ok.contains("tier 1 of 2: memory:") && ok.contains("tier 2 of 2: faulty:memory:"), ok);
        assertEquals(ErrorCode.STORE_UNREACHABLE, down.code());
        assertTrue(down.getMessage().contains("tier 1 of 2: memory:"), down.getMessage());
        assertTrue(down.getMessage().contains("tier 2 of 2: FAILED:"), down.getMessage());
        assertTrue(down.getMessage().contains("connection refused"), down.getMessage());
    }

    @Test
    void closeDrainsTheWriteBack() {
        MemoryStore remote = MemoryStore.withCapacity(1 << 20);
        FaultyTier lower = new FaultyTier(remote);
        MemorySegment v = Segments.random(arena, 300, 12);
        TieredStore s = TieredStore.over(List.of(MemoryStore.withCapacity(1 << 20), lower),
                TieredOptions.DEFAULT.withWriteBack(true));
        for (int i = 0; i < 50; i++) {
            s.put("k" + i, v, PutOptions.DEFAULT);
        }
        s.close();
        WriteBackStats after = s.writeBackStats();

        assertEquals(50, after.written());
        assertEquals(50, lower.puts.get(), "close did not wait for the write-back");
    }

    @Test
    void badTierListsAreErrorsThatNameTheTier() {
        for (String[] c : new String[][] {
                {"tiered:", "needs at least one tier"},
                {"tiered:?write=back", "needs at least one tier"},
                {"tiered:[shm:/same?dir=/tmp][shm:/same?capacity=1MiB&dir=/tmp/]", "tiers 1 and 2 name the same store"},
                {"tiered:[memory:][tiered:[memory:]]", "tier 2 is itself a tiered: store"},
                {"tiered:[memory:", "has no matching ']'"},
                {"tiered:[memory:]x", "after the inner store URIs"},
                {"tiered:[memory:][]", "inner store URI 2 is empty"},
                {"tiered:[memory:][shm:]?write=sideways", "write=sideways is neither back nor through"},
                {"tiered:[memory:][nosuch:x]", "no store handles the scheme 'nosuch:'"},
                {"memory:[memory:]", "memory: stores are not built over other stores"}}) {
            KVException e = assertThrows(KVException.class, () -> KVStores.open(c[0]).close(), c[0]);
            assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
        }
    }

    @Test
    void tiersThatDisagreeOnRemoveAreRefused() {
        KVException e = assertThrows(KVException.class, () -> TieredStore.over(List.of(
                MemoryStore.withCapacity(1 << 20), new FaultyTier(MemoryStore.withCapacity(1 << 20), false)),
                TieredOptions.DEFAULT.withWriteBack(true)));

        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("only some tiers can remove objects; faulty:memory:"), e.getMessage());
    }

    @Test
    void theUriMasksTheSecretsOfEveryTier() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open(
                "tiered:[memory:][nosuch://user:hunter2@127.0.0.1:1/?api_token=abc]"));

        assertFalse(e.toString().contains("hunter2"), e.toString());
        assertFalse(e.toString().contains("abc"), e.toString());
        assertNotEquals(null, e.storeUri());
    }
}
