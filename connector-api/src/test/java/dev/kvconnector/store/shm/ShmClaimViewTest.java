package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Claims and views of the {@code shm:} store beyond the shared contract: across store instances and processes, and
 * with the writer or reader killed (SIGKILL) while it holds one. Every value is a {@link ValuePattern}, checked in
 * every byte.
 */
class ShmClaimViewTest {
    private static final long KIB = 1 << 10;
    private static final long MIB = 1 << 20;

    @RegisterExtension
    final ShmProcessBench bench = new ShmProcessBench("cv");

    private static boolean claimAndCommit(ShmStore s, String key, long bytes, long seed, PutOptions options) {
        StoreClaim claim = s.newClaim();
        assertEquals(ClaimResult.CLAIMED, s.tryClaim(key, bytes, options, claim));
        ValuePattern.fill(claim.segment(), bytes, seed);
        return claim.commit();
    }

    private void assertValue(ShmStore s, String key, long len, long seed) {
        MemorySegment dst = bench.arena().allocate(len, 8);
        assertEquals(len, s.getInto(key, dst), key);
        assertNull(ValuePattern.verify(dst, len), key);
        assertEquals(seed, ValuePattern.seed(dst), key);
    }

    // ------------------------------------------------------------------ claims in one process

    @Test
    void aClaimHoldsItsSpaceInvisiblyUntilCommitThenReplacesTheOldValueForEveryInstance() {
        ShmStore writer = bench.open("capacity=4MiB");
        ShmStore reader = bench.open("capacity=4MiB");
        long initial = writer.freeBytes();
        writer.put("k", bench.pattern(256 * KIB, 1), PutOptions.DEFAULT);
        StoreClaim claim = writer.newClaim();
        assertEquals(ClaimResult.CLAIMED, writer.tryClaim("k", MIB, PutOptions.DEFAULT, claim));
        assertEquals(initial - 256 * KIB - MIB, reader.freeBytes(), "the claim's blocks are taken in the file");
        ValuePattern.fill(claim.segment(), MIB, 2);
        assertValue(reader, "k", 256 * KIB, 1);

        assertTrue(claim.commit());
        assertFalse(claim.isClaimed());
        assertValue(reader, "k", MIB, 2);
        assertValue(writer, "k", MIB, 2);
        assertEquals(initial - MIB, reader.freeBytes(), "the replaced value's blocks are freed");
        assertEquals(1, reader.liveEntries());
    }

    @Test
    void anIfAbsentClaimLosesToAPutMadeWhileItWasOpenAndFreesItsSpace() {
        ShmStore writer = bench.open("capacity=4MiB");
        ShmStore other = bench.open("capacity=4MiB");
        long initial = writer.freeBytes();
        StoreClaim claim = writer.newClaim();
        PutOptions ifAbsent = PutOptions.DEFAULT.withIfAbsent(true);
        assertEquals(ClaimResult.CLAIMED, writer.tryClaim("k", 512 * KIB, ifAbsent, claim));
        ValuePattern.fill(claim.segment(), 512 * KIB, 3);
        assertTrue(other.put("k", bench.pattern(64 * KIB, 4), PutOptions.DEFAULT));

        assertFalse(claim.commit(), "the if-absent claim must lose to the put made meanwhile");
        assertValue(writer, "k", 64 * KIB, 4);
        assertEquals(initial - 64 * KIB, writer.freeBytes(), "the losing claim's blocks are freed");
        assertEquals(ClaimResult.EXISTS, writer.tryClaim("k", 100, ifAbsent, claim));
        assertFalse(claim.isClaimed());
    }

    @Test
    void aClaimIsFullWhenNothingMayBeEvictedAndEvictsLikeAPutOtherwise() {
        ShmStore refusing = bench.open("capacity=1MiB&eviction=refuse");
        refusing.put("old", bench.pattern(768 * KIB, 5), PutOptions.DEFAULT);
        long free = refusing.freeBytes();
        StoreClaim claim = refusing.newClaim();
        assertEquals(ClaimResult.FULL, refusing.tryClaim("new", 512 * KIB, PutOptions.DEFAULT, claim));
        assertFalse(claim.isClaimed());
        assertEquals(free, refusing.freeBytes(), "a FULL claim reserves nothing");
        assertValue(refusing, "old", 768 * KIB, 5);

        ShmStore evicting = bench.open("capacity=1MiB&eviction=lru");
        assertTrue(claimAndCommit(evicting, "new", 512 * KIB, 6, PutOptions.DEFAULT));
        assertValue(evicting, "new", 512 * KIB, 6);
        assertFalse(evicting.exists("old"), "the claim evicted the old value to make room");
    }

    @Test
    void theOpenClaimsOfAStoreInstanceAreFreedWhenItClosesAndNeverBecomeVisible() {
        ShmStore writer = bench.open("capacity=4MiB");
        ShmStore other = bench.open("capacity=4MiB");
        long initial = other.freeBytes();
        StoreClaim claim = writer.newClaim();
        assertEquals(ClaimResult.CLAIMED, writer.tryClaim("k", 2 * MIB, PutOptions.DEFAULT, claim));
        ValuePattern.fill(claim.segment(), 2 * MIB, 7);
        MemorySegment seg = claim.segment();
        assertEquals(initial - 2 * MIB, other.freeBytes());

        writer.close();
        assertEquals(initial, other.freeBytes(), "the closed instance's open claim kept its blocks");
        assertFalse(other.exists("k"), "a claim never committed became visible");
        assertFalse(claim.isClaimed());
        assertThrows(IllegalStateException.class, () -> seg.fill((byte) 0), "a claim segment outlived the mapping");
        KVException closed = assertThrows(KVException.class, claim::commit);
        assertEquals(ErrorCode.CLOSED, closed.code());
        assertTrue(closed.getMessage().contains(writer.path().toString()) && closed.getMessage().contains("closed"),
                closed.getMessage());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, claim::segment).code());
        claim.abort();
    }

    // ------------------------------------------------------------------ views in one process

    @Test
    void aViewKeepsEveryByteWhileItsKeyIsRemovedAndTheStoreEvictsAroundItUntilTheRelease() {
        ShmStore viewer = bench.open("capacity=1MiB");
        ShmStore writer = bench.open("capacity=1MiB");
        writer.put("held", bench.pattern(256 * KIB, 10), PutOptions.DEFAULT);
        StoreView view = viewer.newView();
        assertEquals(256 * KIB, viewer.tryView("held", view));
        assertTrue(writer.remove("held"));
        assertFalse(writer.exists("held"));
        // Twelve puts of a quarter of the capacity: each needs the space of an earlier one, and eviction and
        // reuse would have overwritten the viewed blocks had they been freed.
        for (int i = 0; i < 12; i++) {
            writer.put("other-" + i, bench.pattern(256 * KIB, 100 + i), PutOptions.DEFAULT);
        }
        assertNull(ValuePattern.verify(view.segment(), 256 * KIB), "a held view's bytes changed");
        assertEquals(10, ValuePattern.seed(view.segment()));
        long free = writer.freeBytes();

        view.release();
        assertEquals(free + 256 * KIB, writer.freeBytes(), "the release frees the removed value's blocks");
        assertEquals(0, writer.leasesHeld());
    }

    @Test
    void aViewedValueIsNeverEvictedAndKeepsEveryByteThroughPutsThatFillTheStore() {
        ShmStore s = bench.open("capacity=1MiB");
        s.put("viewed", bench.pattern(256 * KIB, 20), PutOptions.DEFAULT);
        StoreView view = s.newView();
        assertEquals(256 * KIB, s.tryView("viewed", view));
        for (int i = 0; i < 12; i++) {
            s.put("other-" + i, bench.pattern(256 * KIB, 200 + i), PutOptions.DEFAULT);
        }
        assertNull(ValuePattern.verify(view.segment(), 256 * KIB), "a held view's bytes changed");
        assertEquals(20, ValuePattern.seed(view.segment()));
        assertValue(s, "viewed", 256 * KIB, 20);
        view.release();
        for (int i = 0; i < 12; i++) {
            s.put("after-" + i, bench.pattern(256 * KIB, 300 + i), PutOptions.DEFAULT);
        }
        assertFalse(s.exists("viewed"), "once released, the value is evicted like any other");
    }

    @Test
    void closingAStoreInstanceDropsItsViewsAndFreesWhatTheyKept() {
        ShmStore viewer = bench.open("capacity=4MiB");
        ShmStore other = bench.open("capacity=4MiB");
        long initial = other.freeBytes();
        other.put("k", bench.pattern(MIB, 30), PutOptions.DEFAULT);
        StoreView view = viewer.newView();
        assertEquals(MIB, viewer.tryView("k", view));
        MemorySegment seg = view.segment();
        assertTrue(other.remove("k"));
        assertEquals(initial - MIB, other.freeBytes(), "the viewed value stays allocated after its remove");

        viewer.close();
        assertEquals(initial, other.freeBytes(), "the close dropped the view's lease and freed the value");
        assertEquals(0, other.leasesHeld());
        KVException closed = assertThrows(KVException.class, view::segment);
        assertEquals(ErrorCode.CLOSED, closed.code());
        assertTrue(closed.getMessage().contains(viewer.path().toString()), closed.getMessage());
        assertThrows(IllegalStateException.class, () -> seg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
        view.release();
        assertFalse(view.isHeld());
    }

    @Test
    void viewsBeyondTheLimitAreBusyWhileReadsStillRun() {
        ShmStore s = bench.open("capacity=4MiB");
        List<StoreView> views = new ArrayList<>();
        for (int i = 0; i <= ShmStore.MAX_VIEWS; i++) {
            s.put("k" + i, bench.pattern(64, i), PutOptions.DEFAULT);
        }
        for (int i = 0; i < ShmStore.MAX_VIEWS; i++) {
            StoreView v = s.newView();
            assertEquals(64, s.tryView("k" + i, v));
            views.add(v);
        }
        StoreView extra = s.newView();
        KVException busy = assertThrows(KVException.class, () -> s.tryView("k" + ShmStore.MAX_VIEWS, extra));
        assertEquals(ErrorCode.BUSY, busy.code(), busy.getMessage());
        assertFalse(extra.isHeld());
        assertValue(s, "k" + ShmStore.MAX_VIEWS, 64, ShmStore.MAX_VIEWS);
        assertTrue(GetResult.isMiss(s.getInto("absent", bench.arena().allocate(64))));

        views.forEach(StoreView::release);
        assertEquals(0, s.leasesHeld());
        assertEquals(64, s.tryView("k" + ShmStore.MAX_VIEWS, extra), "released views make room for new ones");
        extra.release();
    }

    // ------------------------------------------------------------------ across processes

    @Test
    void aValueCommittedThroughAClaimInOneProcessIsViewedIntactInAnother() throws Exception {
        ShmStore s = bench.open("capacity=16MiB");
        long len = 3 * MIB + 8;
        ChildJvm writer = bench.child(Map.of(), "claim", bench.uri("capacity=16MiB"), "from-child", String.valueOf(len), "41", "commit");
        writer.await("COMMITTED true", 30);
        assertEquals(0, writer.exitCode(10), writer.output());
        try (StoreView view = s.newView()) {
            assertEquals(len, s.tryView("from-child", view));
            assertNull(ValuePattern.verify(view.segment(), len));
            assertEquals(41, ValuePattern.seed(view.segment()));
        }

        assertTrue(claimAndCommit(s, "from-parent", len, 42, PutOptions.DEFAULT));
        ChildJvm reader = bench.child(Map.of(), "view", bench.uri("capacity=16MiB"), "from-parent", "release");
        String viewed = reader.await("VIEWED", 30);
        assertEquals(0, reader.exitCode(10), reader.output());
        assertEquals("VIEWED " + len, viewed, reader.output());
        assertEquals(0, s.leasesHeld());
    }

    @Test
    void aClaimOfAChildKilledBeforeCommitIsNeverVisibleAndItsSpaceReturns() throws Exception {
        ShmStore s = bench.open("capacity=8MiB&eviction=refuse");
        long initial = s.freeBytes();
        s.put("k", bench.pattern(MIB, 50), PutOptions.DEFAULT);
        ChildJvm writer = bench.child(Map.of(), "claim", bench.uri("capacity=8MiB"), "k", String.valueOf(4 * MIB), "51", "hang");
        writer.await("CLAIMED", 30);
        assertEquals(initial - 5 * MIB, s.freeBytes(), "the child's claim holds 4 MiB");
        assertValue(s, "k", MIB, 50);
        writer.kill();

        assertValue(s, "k", MIB, 50);
        s.reclaim();
        assertEquals(initial - MIB, s.freeBytes(), "the dead writer's claim was freed");
        assertValue(s, "k", MIB, 50);

        // Again, without reclaim(): a claim that needs the dead writer's space recovers it by itself.
        writer = bench.child(Map.of(), "claim", bench.uri("capacity=8MiB"), "k", String.valueOf(4 * MIB), "52", "hang");
        writer.await("CLAIMED", 30);
        writer.kill();
        assertTrue(claimAndCommit(s, "big", 6 * MIB, 53, PutOptions.DEFAULT),
                "a claim of the space a dead writer held must succeed under eviction=refuse");
        assertValue(s, "big", 6 * MIB, 53);
        assertValue(s, "k", MIB, 50);
        assertEquals(initial - 7 * MIB, s.freeBytes());
    }

    @Test
    void aViewerKilledWhileHoldingAViewReleasesItsLeaseAndTheRemovedValueIsFreed() throws Exception {
        ShmStore s = bench.open("capacity=8MiB");
        long initial = s.freeBytes();
        s.put("v", bench.pattern(2 * MIB, 60), PutOptions.DEFAULT);
        ChildJvm reader = bench.child(Map.of(), "view", bench.uri("capacity=8MiB"), "v", "hold");
        assertEquals("VIEWED " + 2 * MIB, reader.await("VIEWED", 30), reader.output());
        reader.await("HOLDING", 10);
        assertEquals(1, s.leasesHeld());
        assertTrue(s.remove("v"));
        s.put("filler", bench.pattern(4 * MIB, 61), PutOptions.DEFAULT);
        assertEquals(initial - 6 * MIB, s.freeBytes(), "the viewed value stays allocated after its remove");
        reader.kill();

        ShmProcessBench.awaitTrue("the dead viewer's lease is reaped", () -> {
            s.reclaim();
            return s.leasesHeld() == 0;
        });
        assertEquals(initial - 4 * MIB, s.freeBytes(), "the removed value was freed once its viewer died");
        assertValue(s, "filler", 4 * MIB, 61);
    }

    @Test
    void fourProcessesClaimCommitAbortViewAndEvictAtOnceAndEveryByteTheyViewIsIntact() throws Exception {
        // 2 MiB for 4 x 16 keys of up to 260 KiB: claims evict all the time, while other processes view.
        String uri = bench.uri("capacity=2MiB");
        try (ShmStore s = bench.open("capacity=2MiB")) {
            assertTrue(s.capabilities().contains(dev.kvconnector.store.StoreCapability.CLAIM));
        }
        List<ChildJvm> churners = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            churners.add(bench.child(Map.of(), "churn", uri, "3000", "16", String.valueOf(100 + i)));
        }
        long commits = 0;
        long views = 0;
        for (ChildJvm c : churners) {
            String done = c.await("DONE", 60);
            assertEquals(0, c.exitCode(30), "a churner saw a torn value or failed: " + c.output());
            commits += Long.parseLong(done.replaceAll(".*commits=(\\d+).*", "$1"));
            views += Long.parseLong(done.replaceAll(".*views=(\\d+).*", "$1"));
        }
        assertTrue(commits > 100 && views > 20, "too little happened to prove anything: " + commits + " commits, "
                + views + " views");
        ShmStore after = bench.open("capacity=2MiB");
        for (int k = 0; k < 16; k++) {
            long size = after.size("key-" + k);
            if (size >= 0) {
                MemorySegment dst = bench.arena().allocate(size, 8);
                assertEquals(size, after.getInto("key-" + k, dst));
                assertNull(ValuePattern.verify(dst, size), "key-" + k);
            }
        }
    }
}
