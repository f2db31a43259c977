package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class RecoveryTest {
    @Test
    void aRebuildRecomputesTheBitmapTheCountersAndTheIndexFromTheEntryTable() {
        try (ShmPartsBench b = new ShmPartsBench(16 * 64, 64, 16, true)) {
            int a = b.commit("a", 128, 0);
            int c = b.commit("c", 64, 0);
            long used = b.blocks.usedBlocks();
            // What a holder killed half-way through changing them may leave.
            b.blocks.reset();
            b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_LIVE_ENTRIES, 99);
            b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_FREE_HEAD, 0);
            b.map.asSlice(b.lay.indexOffset(), b.lay.slotCount() * 8).fill((byte) 0);
            b.space.recovery().rebuild();
            assertEquals(used, b.blocks.usedBlocks());
            assertEquals(2, b.index.live());
            assertEquals(a, b.find("a"));
            assertEquals(c, b.find("c"));
            assertFalse(b.blocks.isFree(b.entries.payloadOffset(a) / 64, 2), "the rebuilt bitmap keeps a's blocks");
            assertFalse(b.blocks.isFree(b.entries.payloadOffset(c) / 64, 1));
            assertEquals(2, b.entries.pop(), "and the free list has every other record");
        }
    }

    @Test
    void ofTwoCommittedEntriesWithOneKeyTheLaterCommitWins() {
        try (ShmPartsBench b = new ShmPartsBench(16 * 64, 64, 16, true)) {
            int older = b.commit("k", 64, 0);
            int newer = b.entries.pop();
            long first = b.blocks.allocate(1);
            b.entries.begin(newer, KeyScratch.encode("k"), first, 1, 64, 0);
            b.entries.commit(newer, 0, b.entries.nextCommitSeq());
            b.space.recovery().rebuild();
            assertEquals(newer, b.find("k"));
            assertEquals(ShmLayout.RETIRED, b.entries.state(older));
            assertEquals(1, b.entries.retired());
        }
        try (ShmPartsBench b = new ShmPartsBench(16 * 64, 64, 16, true)) {
            int newer = b.commit("k", 64, 0);
            int older = b.entries.pop();
            b.entries.begin(older, KeyScratch.encode("k"), b.blocks.allocate(1), 1, 64, 0);
            b.entries.commit(older, 0, b.entries.nextCommitSeq());
            b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(newer) + ShmLayout.E_COMMIT_SEQ, 100L);
            b.space.recovery().rebuild();
            assertEquals(newer, b.find("k"), "the later commit wins from a lower record too: its slot is repointed");
            assertEquals(ShmLayout.RETIRED, b.entries.state(older));
        }
    }

    @Test
    void anEntryOverlappingAnotherOrOutOfBoundsIsDropped() {
        try (ShmPartsBench b = new ShmPartsBench(16 * 64, 64, 16, true)) {
            int kept = b.commit("kept", 64, 0);
            int overlapping = b.commit("overlapping", 64, 0);
            int wild = b.commit("wild", 64, 0);
            b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(kept) + ShmLayout.E_PAYLOAD_OFFSET,
                    b.entries.payloadOffset(overlapping));
            b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(wild) + ShmLayout.E_PAYLOAD_OFFSET, 1L << 40);
            b.space.recovery().rebuild();
            assertEquals(overlapping, b.find("overlapping"), "entries are rebuilt from the last one down");
            assertEquals(-1, b.find("kept"), "its blocks were another's");
            assertEquals(-1, b.find("wild"));
            assertEquals(1, b.blocks.usedBlocks());
            assertEquals(ShmLayout.FREE, b.entries.state(wild));
        }
    }

    @Test
    void reapFreesADeadWritersUnfinishedPutAndTheRetiredEntriesOfDeadReaders() {
        try (ShmPartsBench b = new ShmPartsBench(16 * 64, 64, 16, true)) {
            int unfinished = b.entries.pop();
            b.lock.lock();
            try {
                b.entries.begin(unfinished, KeyScratch.encode("u"), b.blocks.allocate(2), 2, 128, 0);
            } finally {
                b.lock.unlock();
            }
            b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(unfinished) + ShmLayout.E_OWNER, ShmPartsBench.DEAD);
            int removed = b.commit("r", 64, 0);
            int deadReader = b.leases.claimSlot();
            b.map.set(ValueLayout.JAVA_LONG, b.lay.lease(deadReader, 0), removed + 1L);
            b.map.set(ValueLayout.JAVA_LONG, b.lay.proc(deadReader), ShmPartsBench.DEAD);
            b.index.remove(removed);
            b.space.retire(removed);
            assertEquals(3, b.blocks.usedBlocks(), "the dead reader's lease keeps the removed entry");
            b.space.recovery().reap();
            assertEquals(0, b.blocks.usedBlocks());
            assertEquals(ShmLayout.FREE, b.entries.state(unfinished));
            assertEquals(ShmLayout.FREE, b.entries.state(removed));
            assertEquals(0, b.entries.retired());
        }
    }
}
