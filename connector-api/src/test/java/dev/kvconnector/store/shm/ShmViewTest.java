package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * {@link ShmView}'s contract as a handle: what it allows when empty, held and released, that a second release is
 * reported and touches no other view's lease, what it does after the store's close and across a truncation of the
 * file, and which handles a store refuses ({@link ShmRig} wires it as the store does).
 */
class ShmViewTest {
    private static final int BLOCK = 4096;

    @Test
    void anEmptyHandleHasNoSegmentAndItsReleaseIsReportedButItsCloseIsQuiet() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmView v = r.newView();
            assertFalse(v.isHeld());
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, v::segment);
            KVException twice = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, v::release);
            assertTrue(twice.getMessage().contains("released twice"), twice.getMessage());
            v.close();
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void aHeldViewIsTheValueReadOnlyAndItsReleaseGivesTheLeaseBackOnce() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", 3 * BLOCK - 8, 5));
            ShmView v = r.newView();
            assertEquals(3 * BLOCK - 8, r.view("k", v));
            assertTrue(v.isHeld());
            MemorySegment seg = v.segment();
            assertTrue(seg.isReadOnly());
            assertNull(ValuePattern.verify(seg, 3 * BLOCK - 8));
            assertThrows(IllegalArgumentException.class, () -> seg.set(ValueLayout.JAVA_BYTE, 0, (byte) 1));
            assertEquals(1, r.parts.leases.held());

            v.close();
            assertFalse(v.isHeld());
            assertEquals(0, r.parts.leases.held());
            v.close();
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, v::release);
        }
    }

    @Test
    void aSecondReleaseLeavesTheLeaseThatTheNextViewTookAlone() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("a", BLOCK, 1));
            assertTrue(r.put("b", 2 * BLOCK, 2));
            ShmView first = r.newView();
            ShmView second = r.newView();
            r.view("a", first);
            first.release();
            r.view("b", second);
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, first::release);

            assertEquals(1, r.parts.leases.held(), "the second view's lease survived the bad release");
            assertTrue(r.writer.remove(ShmRig.key("b")));
            assertEquals(13, r.freeBlocks(), "b, still viewed, was not freed by its remove");
            assertEquals(2, ValuePattern.seed(second.segment()));
            second.release();
            assertEquals(15, r.freeBlocks());
        }
    }

    @Test
    void aStoreRefusesAnotherStoresHandleAndOneStillHoldingAValue() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 1));
            ShmView foreign = new ShmView(new Object(), r.uri(), r.gate, r.reader);
            KVException e = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT,
                    () -> ShmView.ownedBy(r.owner, r.uri(), foreign, ShmRig.key("k")));
            assertTrue(e.getMessage().contains("does not belong to this store"), e.getMessage());
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, () -> ShmView.ownedBy(r.owner, r.uri(), null, ShmRig.key("k")));
            ShmView v = r.newView();
            assertSame(v, ShmView.ownedBy(r.owner, r.uri(), v, ShmRig.key("k")));
            r.view("k", v);
            KVException held = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT,
                    () -> ShmView.ownedBy(r.owner, r.uri(), v, ShmRig.key("k")));
            assertTrue(held.getMessage().contains("still holds an object"), held.getMessage());
            v.release();
        }
    }

    @Test
    void afterTheCloseTheSegmentIsClosedNamingTheFileAndTheReleaseOnlyEmptiesTheHandle() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 1));
            ShmView v = r.newView();
            r.view("k", v);
            r.gate.close();
            r.writer.freeAtClose(r.procSlot);
            assertEquals(0, r.parts.leases.held(), "the close dropped the view's lease");

            KVException closed = ShmRig.assertKv(ErrorCode.CLOSED, v::segment);
            assertTrue(closed.getMessage().contains(r.file.path().toString()), closed.getMessage());
            v.release();
            assertFalse(v.isHeld());
        }
    }

    @Test
    void aViewHeldAcrossATruncationFailsOnUseNamingTheFileAndStillReleasesItsLease() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("before", BLOCK, 1));
            assertTrue(r.put("after", 4 * BLOCK, 2));
            ShmView kept = r.newView();
            ShmView cutOff = r.newView();
            r.view("before", kept);
            r.view("after", cutOff);
            long cut = r.lay.payloadOffset() + 2 * BLOCK;
            r.truncate(cut);

            KVException e = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, cutOff::segment);
            assertTrue(e.getMessage().contains(r.file.path() + " is " + cut + " bytes, but this store mapped it at "
                    + r.lay.fileSize() + " bytes: another process truncated or replaced it")
                    && e.getMessage().contains("(key after)"), e.getMessage());
            assertEquals(1, ValuePattern.seed(kept.segment()), "a view before the cut still reads");
            cutOff.release();
            kept.release();
            assertEquals(0, r.parts.leases.held());
        }
    }

    @Test
    void aViewWhoseFileWasCutIntoTheTablesFailsOnUseAndItsReleaseTouchesNothing() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            assertTrue(r.put("k", BLOCK, 1));
            ShmView v = r.newView();
            r.view("k", v);
            r.truncate(0);
            KVException e = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, v::segment);
            assertTrue(e.getMessage().contains(r.file.path() + " is 0 bytes"), e.getMessage());
            v.release();
            assertFalse(v.isHeld());
        }
    }
}
