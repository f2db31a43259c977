package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * {@link ShmWriter}'s contract, through the writer itself over a real file ({@link ShmRig}): what a put, a claim, its
 * commit or abort, a remove and a reclaim take and give back, what each tells the event ring, and how each fails: a
 * full store, eviction meeting a leased entry, a claim whose writer is gone, a lock it cannot take, a truncated file.
 */
class ShmWriterTest {
    private static final int BLOCK = 4096;

    @Test
    void aPutReplacesTheKeysValueAndFreesTheBlocksOfTheOldOne() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 3 * BLOCK - 8, 1));
            int first = r.entryOf("k");
            assertEquals(13, r.freeBlocks());
            assertTrue(r.put("k", BLOCK, 2));
            r.assertValue("k", BLOCK, 2);
            assertEquals(15, r.freeBlocks(), "the replaced value's three blocks came back");
            assertEquals(ShmLayout.FREE, r.parts.entries.state(first), "the replaced entry was freed");
            assertEquals(1, r.parts.index.live());
        }
    }

    @Test
    void anIfAbsentPutKeepsALiveValueTakesNothingAndCountsAnExpiredOneAsAbsent() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            PutOptions ifAbsent = PutOptions.DEFAULT.withIfAbsent(true);
            assertTrue(r.put("k", 64, 1));
            assertFalse(r.put("k", 64, 2, ifAbsent));
            assertEquals(15, r.freeBlocks(), "the refused put took no block");
            r.assertValue("k", 64, 1);
            assertTrue(r.put("short", 64, 3, PutOptions.DEFAULT.withTtlMillis(1)));
            Thread.sleep(5);
            assertTrue(r.put("short", 64, 4, ifAbsent), "an expired value counts as absent");
            r.assertValue("short", 64, 4);
        }
    }

    @Test
    void aFullStoreThatMayNotEvictFailsThePutNamingWhatIsShortAndTakesNothing() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB&entries=16&eviction=refuse")) {
            for (int i = 0; i < 8; i++) {
                assertTrue(r.put("k" + i, 2 * BLOCK, i));
            }
            KVException noRun = ShmRig.assertKv(ErrorCode.STORE_FULL, () -> r.put("more", BLOCK, 99));
            assertTrue(noRun.getMessage().contains("no run of 1 free blocks of 4096 bytes")
                    && noRun.getMessage().contains("eviction=refuse"), noRun.getMessage());
            assertTrue(r.parts.entries.retired() == 0 && r.freeBlocks() == 0 && r.parts.index.live() == 8);
            for (int i = 0; i < 8; i++) {
                r.assertValue("k" + i, 2 * BLOCK, i);
            }
        }
        try (ShmRig r = ShmRig.open("capacity=1MiB&block=4KiB&entries=16&eviction=refuse")) {
            for (int i = 0; i < 16; i++) {
                assertTrue(r.put("k" + i, 64, i));
            }
            KVException noEntry = ShmRig.assertKv(ErrorCode.STORE_FULL, () -> r.put("more", 64, 99));
            assertTrue(noEntry.getMessage().contains("all 16 entries are in use"), noEntry.getMessage());
            assertEquals(r.lay.blockCount() - 16, r.freeBlocks(), "the refused put took no block");
        }
    }

    @Test
    void aValueLargerThanTheCapacityIsTooLargeForAPutAndAClaim() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            KVException put = ShmRig.assertKv(ErrorCode.VALUE_TOO_LARGE, () -> r.put("k", 65_544, 1));
            assertTrue(put.getMessage().contains("65544") && put.getMessage().contains("65536"), put.getMessage());
            ShmRig.assertKv(ErrorCode.VALUE_TOO_LARGE, () -> r.claim("k", 65_537, PutOptions.DEFAULT, r.newClaim()));
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, () -> r.claim("k", -1, PutOptions.DEFAULT, r.newClaim()));
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void evictionPassesOverALeasedEntryAndAStoreOfLeasedEntriesOnlyIsFull() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=16KiB&block=4KiB&entries=16")) {
            assertTrue(r.put("viewed", 2 * BLOCK, 1));
            assertTrue(r.put("other", 2 * BLOCK, 2));
            ShmView view = r.newView();
            assertEquals(2 * BLOCK, r.view("viewed", view));

            assertTrue(r.put("new", 2 * BLOCK, 3), "eviction made room by taking the unleased entry");
            assertEquals(-1, r.entryOf("other"));
            assertTrue(r.entryOf("viewed") >= 0, "the leased entry was passed over");
            KVException full = ShmRig.assertKv(ErrorCode.STORE_FULL, () -> r.put("big", 4 * BLOCK, 4));
            assertTrue(full.getMessage().contains("every entry is being written or read"), full.getMessage());
            assertEquals(ClaimResult.FULL, r.claim("big", 4 * BLOCK, PutOptions.DEFAULT, r.newClaim()));
            assertNull(ValuePattern.verify(view.segment(), 2 * BLOCK), "the viewed bytes were overwritten");
            assertEquals(1, ValuePattern.seed(view.segment()));

            view.release();
            assertTrue(r.put("big", 4 * BLOCK, 4), "released, the entry is evicted like any other");
            r.assertValue("big", 4 * BLOCK, 4);
        }
    }

    @Test
    void removeRetiresALeasedEntryWhoseLastReaderFreesItAndReportsAnExpiredOneAsGone() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 2 * BLOCK, 1));
            int e = r.entryOf("k");
            ShmView view = r.newView();
            r.view("k", view);
            assertTrue(r.writer.remove(ShmRig.key("k")));
            assertEquals(ShmLayout.RETIRED, r.parts.entries.state(e));
            assertEquals(1, r.parts.entries.retired());
            assertEquals(14, r.freeBlocks(), "a removed entry keeps its blocks while it is read");
            assertFalse(r.writer.remove(ShmRig.key("k")), "removed once");

            view.release();
            assertEquals(ShmLayout.FREE, r.parts.entries.state(e), "the last reader out freed it");
            assertEquals(16, r.freeBlocks());
            assertEquals(0, r.parts.entries.retired());

            assertTrue(r.put("short", 64, 2, PutOptions.DEFAULT.withTtlMillis(1)));
            Thread.sleep(5);
            assertFalse(r.writer.remove(ShmRig.key("short")), "an expired value was no longer there to remove");
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void reclaimRetiresExpiredEntriesAndFreesWhatADeadWriterLeft() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("kept", BLOCK, 1));
            assertTrue(r.put("short", BLOCK, 2, PutOptions.DEFAULT.withTtlMillis(1)));
            ShmClaim orphan = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("orphan", 2 * BLOCK, PutOptions.DEFAULT, orphan));
            r.map().set(ValueLayout.JAVA_LONG, r.lay.entry(orphan.entry) + ShmLayout.E_OWNER, ShmPartsBench.DEAD);
            Thread.sleep(5);
            assertEquals(12, r.freeBlocks());

            r.writer.reclaim();
            assertEquals(15, r.freeBlocks(), "the expired value and the dead writer's claim came back");
            assertEquals(-1, r.entryOf("short"));
            r.assertValue("kept", BLOCK, 1);
        }
    }

    @Test
    void aClaimIsInvisibleUntilItsCommitAndItsSegmentIsExactlyItsBlocks() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 1));
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("k", 3 * BLOCK - 8, PutOptions.DEFAULT, c));
            assertEquals(ShmLayout.WRITING, r.parts.entries.state(c.entry));
            assertEquals(12, r.freeBlocks(), "the claim holds its three blocks");
            MemorySegment seg = c.segment();
            assertEquals(3 * BLOCK - 8, seg.byteSize());
            assertEquals(r.map().address() + r.lay.payloadOffset() + r.parts.entries.payloadOffset(c.entry),
                    seg.address(), "the segment is the entry's blocks in the mapping");
            ValuePattern.fill(seg, 3 * BLOCK - 8, 2);
            r.assertValue("k", BLOCK, 1);

            assertTrue(r.writer.commit(c, r.file.size().now()));
            assertFalse(c.isClaimed());
            r.assertValue("k", 3 * BLOCK - 8, 2);
            assertEquals(13, r.freeBlocks(), "the old value's block came back");
        }
    }

    @Test
    void anAbortFreesTheClaimAndLeavesTheOldValue() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 1));
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("k", 4 * BLOCK, PutOptions.DEFAULT, c));
            int e = c.entry;
            ValuePattern.fill(c.segment(), 4 * BLOCK, 2);
            r.writer.abort(c);
            assertFalse(c.isClaimed());
            assertEquals(ShmLayout.FREE, r.parts.entries.state(e));
            assertEquals(15, r.freeBlocks());
            r.assertValue("k", BLOCK, 1);
        }
    }

    @Test
    void anIfAbsentClaimIsExistsForALiveKeyAndLosesToAPutMadeWhileItWasOpen() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            PutOptions ifAbsent = PutOptions.DEFAULT.withIfAbsent(true);
            assertTrue(r.put("there", 64, 1));
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.EXISTS, r.claim("there", BLOCK, ifAbsent, c));
            assertFalse(c.isClaimed());
            assertEquals(ClaimResult.CLAIMED, r.claim("k", 2 * BLOCK, ifAbsent, c));
            assertTrue(r.put("k", 64, 2));
            assertFalse(r.writer.commit(c, r.file.size().now()), "the put made meanwhile wins");
            r.assertValue("k", 64, 2);
            assertEquals(14, r.freeBlocks(), "the losing claim's blocks came back");
        }
    }

    @Test
    void aCommitAfterARepairFreedTheClaimOfAWriterFoundDeadFailsAndPublishesNothing() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("k", 2 * BLOCK, PutOptions.DEFAULT, c));
            // What another process's reaper sees of a claim whose writer is gone: a WRITING entry of a dead token.
            r.map().set(ValueLayout.JAVA_LONG, r.lay.entry(c.entry) + ShmLayout.E_OWNER, ShmPartsBench.DEAD);
            r.writer.reclaimDead();
            assertEquals(16, r.freeBlocks(), "the reaper freed the dead writer's claim");
            assertTrue(r.claim("other", 2 * BLOCK, PutOptions.DEFAULT, r.newClaim()) == ClaimResult.CLAIMED);

            KVException e = ShmRig.assertKv(ErrorCode.STORE_ERROR, () -> r.writer.commit(c, r.file.size().now()));
            assertTrue(e.getMessage().contains("reclaimed by a repair") && e.getMessage().contains("claim was open"),
                    e.getMessage());
            assertFalse(c.isClaimed());
            assertEquals(-1, r.entryOf("k"), "nothing was published");
            assertEquals(14, r.freeBlocks(), "and the other claim's blocks were not freed in its place");
        }
    }

    @Test
    void aCommitThatCannotTakeTheLockKeepsItsClaimForALaterCommit() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB&lock-timeout=100ms")) {
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("k", BLOCK, PutOptions.DEFAULT, c));
            ValuePattern.fill(c.segment(), BLOCK, 7);
            r.parts.lock.lock();
            try {
                ShmRig.assertKv(ErrorCode.TIMEOUT, () -> r.writer.commit(c, r.file.size().now()));
            } finally {
                r.parts.lock.unlock();
            }
            assertTrue(c.isClaimed(), "a commit that timed out keeps its claim");
            assertTrue(r.writer.commit(c, r.file.size().now()));
            r.assertValue("k", BLOCK, 7);
        }
    }

    @Test
    void theCloseFreesOpenClaimsAndTheRemovedEntriesThatViewsKept() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("viewed", 2 * BLOCK, 1));
            ShmView view = r.newView();
            r.view("viewed", view);
            assertTrue(r.writer.remove(ShmRig.key("viewed")));
            ShmClaim open = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("open", 3 * BLOCK, PutOptions.DEFAULT, open));
            assertEquals(11, r.freeBlocks());

            r.writer.freeAtClose(r.procSlot);
            assertEquals(16, r.freeBlocks());
            assertEquals(0, r.parts.leases.held());
            assertEquals(-1, r.entryOf("open"), "an open claim never becomes visible");
        }
    }

    @Test
    void aTruncatedFileTakesNoPutClaimOrCommitFreesWhatTheyTookAndStillRemoves() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("before", BLOCK, 1));
            ShmClaim open = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("open", BLOCK, PutOptions.DEFAULT, open));
            long cut = r.lay.payloadOffset() + 8 * BLOCK;
            r.truncate(cut);
            String named = r.file.path() + " is " + cut + " bytes, but this store mapped it at " + r.lay.fileSize()
                    + " bytes: another process truncated or replaced it";

            for (Executable call : List.<Executable>of(() -> r.put("new", BLOCK, 2),
                    () -> r.claim("new", BLOCK, PutOptions.DEFAULT, r.newClaim()),
                    () -> r.writer.commit(open, r.file.size().now()))) {
                KVException e = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, call);
                assertTrue(e.getMessage().contains(named) && e.hint().contains("delete it"), e.getMessage());
            }
            assertFalse(open.isClaimed());
            assertEquals(15, r.freeBlocks(), "the refused commit freed its claim, the refused put and claim took none");
            r.assertValue("before", BLOCK, 1);
            assertTrue(r.writer.remove(ShmRig.key("before")), "removal touches only the tables, which are whole");
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void everyChangeIsToldToTheEventRingAndAnAbortedClaimIsNot() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=20KiB&block=4KiB&entries=16")) {
            EventReceiver events = new EventReceiver(r.map(), r.lay);
            assertTrue(r.put("a", 2 * BLOCK, 1));
            assertTrue(r.put("a", BLOCK, 2));
            ShmClaim c = r.newClaim();
            r.claim("b", BLOCK, PutOptions.DEFAULT, c);
            r.writer.abort(c);
            r.claim("b", BLOCK, PutOptions.DEFAULT, c);
            assertTrue(r.writer.commit(c, r.file.size().now()));
            assertTrue(r.writer.remove(ShmRig.key("b")));
            assertTrue(r.put("c", 4 * BLOCK, 3), "evicts a");
            assertTrue(r.put("d", BLOCK, 4, PutOptions.DEFAULT.withTtlMillis(1)));
            Thread.sleep(5);
            r.writer.reclaim();

            List<String> told = new ArrayList<>();
            events.poll((type, seq, bytes, key) -> told.add(type + " " + key + " " + bytes), 100);
            assertEquals(List.of(ShmLayout.EVENT_STORED + " a 8192", ShmLayout.EVENT_STORED + " a 4096",
                    ShmLayout.EVENT_STORED + " b 4096", ShmLayout.EVENT_REMOVED + " b 4096",
                    ShmLayout.EVENT_EVICTED + " a 4096", ShmLayout.EVENT_STORED + " c 16384",
                    ShmLayout.EVENT_STORED + " d 4096", ShmLayout.EVENT_EXPIRED + " d 4096"), told);
            assertEquals(GetResult.MISS, r.reader.getInto(ShmRig.key("d"), r.arena.allocate(BLOCK),
                    r.file.size().now()));
        }
    }
}
