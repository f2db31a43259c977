package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * {@link ShmClaim}'s contract as a handle: what it allows when empty, claimed, committed, aborted, after the store's
 * close and after a truncation of the file, and which handles a store refuses ({@link ShmRig} wires it as the store
 * does).
 */
class ShmClaimTest {
    private static final int BLOCK = 4096;

    @Test
    void anEmptyHandleHasNoSegmentNorCommitAndAbortsQuietly() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim c = r.newClaim();
            assertFalse(c.isClaimed());
            KVException seg = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, c::segment);
            assertTrue(seg.getMessage().contains("holds no claim"), seg.getMessage());
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, c::commit);
            c.abort();
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void aStoreRefusesAnotherStoresHandleAndOneStillHoldingItsClaim() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim mine = r.newClaim();
            ShmClaim foreign = new ShmClaim(new Object(), r.uri(), r.gate, r.writer);
            StoreClaim alien = new StoreClaim() {
                @Override
                public MemorySegment segment() {
                    return MemorySegment.NULL;
                }

                @Override
                public boolean isClaimed() {
                    return false;
                }

                @Override
                public boolean commit() {
                    return false;
                }

                @Override
                public void abort() {
                }
            };
            for (StoreClaim wrong : new StoreClaim[] {foreign, alien, null}) {
                KVException e = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT,
                        () -> ShmClaim.ownedBy(r.owner, r.uri(), wrong, ShmRig.key("k")));
                assertTrue(e.getMessage().contains("does not belong to this store"), e.getMessage());
            }
            assertSame(mine, ShmClaim.ownedBy(r.owner, r.uri(), mine, ShmRig.key("k")));
            assertEquals(ClaimResult.CLAIMED, r.claim("first", BLOCK, PutOptions.DEFAULT, mine));
            KVException held = ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT,
                    () -> ShmClaim.ownedBy(r.owner, r.uri(), mine, ShmRig.key("second")));
            assertTrue(held.getMessage().contains("still holds a claim on first"), held.getMessage());
        }
    }

    @Test
    void aCommitAndAnAbortEachEmptyTheHandleForItsNextClaim() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("a", BLOCK, PutOptions.DEFAULT, c));
            assertTrue(c.isClaimed());
            ValuePattern.fill(c.segment(), BLOCK, 1);
            assertTrue(c.commit());
            assertFalse(c.isClaimed());
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, c::segment);
            ShmRig.assertKv(ErrorCode.INVALID_ARGUMENT, c::commit);
            c.abort();
            r.assertValue("a", BLOCK, 1);

            assertEquals(ClaimResult.CLAIMED, r.claim("b", 2 * BLOCK, PutOptions.DEFAULT, c));
            c.abort();
            c.abort();
            assertFalse(c.isClaimed());
            assertEquals(15, r.freeBlocks(), "the abort gave b's blocks back, once");
            assertEquals(-1, r.entryOf("b"));
            r.assertValue("a", BLOCK, 1);
        }
    }

    @Test
    void afterTheCloseTheClaimIsGoneItsCommitIsClosedNamingTheFileAndItsAbortOnlyEmptiesIt() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim committing = r.newClaim();
            ShmClaim aborting = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("a", BLOCK, PutOptions.DEFAULT, committing));
            assertEquals(ClaimResult.CLAIMED, r.claim("b", BLOCK, PutOptions.DEFAULT, aborting));
            r.gate.close();
            r.writer.freeAtClose(r.procSlot);
            assertEquals(16, r.freeBlocks(), "the close freed both open claims");

            assertFalse(committing.isClaimed());
            KVException seg = ShmRig.assertKv(ErrorCode.CLOSED, committing::segment);
            assertTrue(seg.getMessage().contains(r.file.path().toString()), seg.getMessage());
            KVException commit = ShmRig.assertKv(ErrorCode.CLOSED, committing::commit);
            assertTrue(commit.getMessage().contains(r.file.path().toString())
                    && commit.getMessage().contains("(key a)"), commit.getMessage());
            aborting.abort();
            assertFalse(aborting.isClaimed());
            assertEquals(16, r.freeBlocks());
        }
    }

    @Test
    void aClaimWhoseBytesATruncationCutOffFailsOnUseNamingTheFileAndItsCommitFreesIt() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim c = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("k", 4 * BLOCK, PutOptions.DEFAULT, c));
            long cut = r.lay.payloadOffset() + 2 * BLOCK;
            r.truncate(cut);
            String named = r.file.path() + " is " + cut + " bytes, but this store mapped it at " + r.lay.fileSize();
            KVException seg = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, c::segment);
            assertTrue(seg.getMessage().contains(named) && seg.getMessage().contains("(key k)"), seg.getMessage());
            KVException commit = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, c::commit);
            assertTrue(commit.getMessage().contains(named), commit.getMessage());
            assertFalse(c.isClaimed());
            assertEquals(16, r.freeBlocks(), "the refused commit freed the claim");
            assertEquals(-1, r.entryOf("k"));
        }
    }

    @Test
    void aClaimWhoseFileWasCutIntoTheTablesOnlyEmptiesItsHandleAndTouchesNothing() throws Exception {
        try (ShmRig r = ShmRig.open("capacity=64KiB&block=4KiB")) {
            ShmClaim aborted = r.newClaim();
            ShmClaim committed = r.newClaim();
            assertEquals(ClaimResult.CLAIMED, r.claim("a", BLOCK, PutOptions.DEFAULT, aborted));
            assertEquals(ClaimResult.CLAIMED, r.claim("b", BLOCK, PutOptions.DEFAULT, committed));
            r.truncate(ShmLayout.HEADER_BYTES);
            aborted.abort();
            assertFalse(aborted.isClaimed());
            KVException commit = ShmRig.assertKv(ErrorCode.CORRUPT_OBJECT, committed::commit);
            assertTrue(commit.getMessage().contains("the store's tables are lost")
                    && commit.getMessage().contains(r.file.path() + " is " + ShmLayout.HEADER_BYTES + " bytes"),
                    commit.getMessage());
            assertFalse(committed.isClaimed());
        }
    }
}
