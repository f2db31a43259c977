package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * {@link ShmReader}'s contract, through the reader itself over a real file ({@link ShmRig}): a read leases its entry
 * only while it copies (a view until its release), the last reader out frees what was removed meanwhile, an expired
 * entry is a miss, and what cannot be read fails naming why: a destination it must not write, too many views, numbers
 * that point outside the payload, a value a truncation of the file cut off.
 */
class ShmReaderTest {
    private static final int BLOCK = 4096;

    private static long get(ShmRig r, String key, MemorySegment dst) {
        return r.reader.getInto(ShmRig.key(key), dst, r.file.size().now());
    }

    @Test
    void aHitCopiesTheValueMarksItReadAndHoldsNoLeaseAfterwards() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 3 * BLOCK - 8, 5));
            int e = r.entryOf("k");
            r.parts.entries.clearReferenced(e);
            r.assertValue("k", 3 * BLOCK - 8, 5);
            assertTrue(r.parts.entries.clearReferenced(e), "the read gave the entry its CLOCK second chance");
            assertEquals(0, r.parts.leases.held());
            assertEquals(3 * BLOCK - 8, r.reader.size(ShmRig.key("k"), r.file.size().now()));
            assertTrue(r.reader.contains(ShmRig.key("k")));
            assertEquals(0, r.parts.leases.held(), "size and contains hold no lease either");
        }
    }

    @Test
    void aMissAndATooSmallDestinationCopyNothingAndHoldNoLease() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 5));
            MemorySegment dst = r.arena.allocate(BLOCK - 8);
            dst.fill((byte) 0x5A);
            long tooSmall = get(r, "k", dst);
            assertTrue(GetResult.isTooSmall(tooSmall));
            assertEquals(BLOCK, GetResult.requiredSize(tooSmall));
            assertEquals(-1, dst.mismatch(r.arena.allocate(BLOCK - 8).fill((byte) 0x5A)),
                    "a too-small destination was written");
            assertEquals(GetResult.MISS, get(r, "absent", dst));
            assertEquals(-1, r.reader.size(ShmRig.key("absent"), r.file.size().now()));
            assertFalse(r.reader.contains(ShmRig.key("absent")));
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void aNullOrReadOnlyDestinationIsAnInvalidArgumentNamingTheKey() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 5));
            KVException ro = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT,
                    () -> get(r, "k", r.arena.allocate(BLOCK).asReadOnly()));
            assertTrue(ro.getMessage().contains("read-only") && ro.getMessage().contains("k"), ro.getMessage());
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, () -> get(r, "k", null));
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void anExpiredEntryIsAMissAndIsReclaimedOnTheWayUnlessTheLockIsBusy() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("a", BLOCK, 1, PutOptions.DEFAULT.withTtlMillis(1)));
            assertTrue(r.put("b", BLOCK, 2, PutOptions.DEFAULT.withTtlMillis(1)));
            Thread.sleep(5);
            MemorySegment dst = r.arena.allocate(BLOCK);
            r.parts.lock.lock();
            try {
                assertEquals(GetResult.MISS, get(r, "a", dst));
            } finally {
                r.parts.lock.unlock();
            }
            assertTrue(r.entryOf("a") >= 0, "with the lock busy the expired entry is left for later");
            assertEquals(GetResult.MISS, get(r, "b", dst));
            assertEquals(-1, r.entryOf("b"), "the expired entry was reclaimed on the way");
            assertEquals(15, r.freeBlocks());
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void aViewHoldsItsLeaseUntilReleasedAndItsReleaseFreesTheEntryRemovedMeanwhile() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 2 * BLOCK, 5));
            int e = r.entryOf("k");
            ShmView v = r.newView();
            assertEquals(2 * BLOCK, r.view("k", v));
            assertEquals(1, r.parts.leases.held());
            assertTrue(r.writer.remove(ShmRig.key("k")));
            assertEquals(14, r.freeBlocks(), "removed while viewed: kept");

            v.release();
            assertEquals(0, r.parts.leases.held());
            assertEquals(ShmLayout.FREE, r.parts.entries.state(e));
            assertEquals(16, r.freeBlocks(), "the last reader out freed it");
        }
    }

    @Test
    void aReleaseFreesNothingWhileAnotherReaderStillLeasesTheEntry() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 2 * BLOCK, 5));
            ShmView first = r.newView();
            ShmView second = r.newView();
            r.view("k", first);
            r.view("k", second);
            assertTrue(r.writer.remove(ShmRig.key("k")));
            first.release();
            assertEquals(14, r.freeBlocks(), "the second view still reads the removed value");
            assertEquals(5, ValuePattern.seed(second.segment()));
            second.release();
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void viewsBeyondTheLimitAreBusyAndNeitherABusyViewNorAMissCountsAgainstIt() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=1MiB&block=4KiB")) {
            List<ShmView> views = new ArrayList<>();
            for (int i = 0; i < ShmStore.MAX_VIEWS; i++) {
                assertTrue(r.put("k" + i, 64, i));
                ShmView v = r.newView();
                assertEquals(GetResult.MISS, r.view("absent", v), "a miss holds nothing");
                assertEquals(64, r.view("k" + i, v));
                views.add(v);
            }
            ShmView extra = r.newView();
            for (int attempt = 0; attempt < 3; attempt++) {
                KVException busy = ShmRig.assertKv(ErrorCode.BUSY, () -> r.view("k0", extra));
                assertTrue(busy.getMessage().contains(String.valueOf(ShmStore.MAX_VIEWS)), busy.getMessage());
            }
            assertFalse(extra.isHeld());
            assertEquals(ShmStore.MAX_VIEWS, r.parts.leases.held());
            r.assertValue("k1", 64, 1);

            views.removeFirst().release();
            assertEquals(64, r.view("k0", extra), "one release makes room for exactly one view");
            ShmRig.assertKv(ErrorCode.BUSY, () -> r.view("k1", r.newView()));
            extra.release();
            views.forEach(ShmView::release);
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void anEntryWhoseNumbersPointOutsideThePayloadIsCorruptNamingTheFileAndReleasesItsLease() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 5));
            int e = r.entryOf("k");
            r.map().set(ValueLayout.JAVA_LONG, r.lay.entry(e) + ShmLayout.E_PAYLOAD_OFFSET, 64L << 10);
            for (Executable read : List.<Executable>of(() -> get(r, "k", r.arena.allocate(BLOCK)),
                    () -> r.reader.size(ShmRig.key("k"), r.file.size().now()), () -> r.view("k", r.newView()))) {
                KVException c = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, read);
                assertTrue(c.getMessage().contains(r.file.path().toString())
                        && c.getMessage().contains("offset=65536"), c.getMessage());
            }
            assertEquals(0, r.parts.leases.held());
            r.map().set(ValueLayout.JAVA_LONG, r.lay.entry(e) + ShmLayout.E_PAYLOAD_OFFSET, 0L);
        }
    }

    @Test
    void aValueThatATruncationCutOffIsCorruptNamingTheFileWhileValuesBeforeTheCutStayReadable() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("before", 2 * BLOCK, 1));
            assertTrue(r.put("across", 4 * BLOCK, 2));
            long cut = r.lay.payloadOffset() + 3 * BLOCK;
            r.truncate(cut);
            String named = r.file.path() + " is " + cut + " bytes, but this store mapped it at " + r.lay.fileSize()
                    + " bytes: another process truncated or replaced it";
            for (Executable read : List.<Executable>of(() -> get(r, "across", r.arena.allocate(4 * BLOCK)),
                    () -> r.view("across", r.newView()), () -> r.reader.size(ShmRig.key("across"), cut))) {
                KVException c = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, read);
                assertTrue(c.getMessage().contains(named) && c.getMessage().contains("past byte " + cut)
                        && c.getMessage().contains("across"), c.getMessage());
            }
            assertEquals(0, r.parts.leases.held(), "the refused reads let go of their leases");
            r.assertValue("before", 2 * BLOCK, 1);
            ShmView v = r.newView();
            assertEquals(2 * BLOCK, r.view("before", v), "a value before the cut can still be viewed");
            v.release();
            assertEquals(2 * BLOCK, r.reader.size(ShmRig.key("before"), cut));
        }
    }

    @Test
    void theSameValueViewedAgainIsTheSameSegmentReadOnlyAndExactlyTheValue() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 3 * BLOCK - 8, 5));
            ShmView v = r.newView();
            r.view("k", v);
            MemorySegment first = v.segment();
            assertTrue(first.isReadOnly());
            assertEquals(3 * BLOCK - 8, first.byteSize());
            v.release();
            r.view("k", v);
            assertSame(first, v.segment(), "the second view reuses the slice of the first");
            v.release();
        }
    }
}
