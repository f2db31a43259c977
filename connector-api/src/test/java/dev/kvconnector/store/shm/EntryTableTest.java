package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class EntryTableTest {
    private final ShmPartsBench b = new ShmPartsBench(1 << 16, 64, 16, true);
    private final EntryTable entries = b.entries;

    @AfterEach
    void close() {
        b.close();
    }

    @Test
    void recordsComeFromTheFreeListFirstThenBelowTheWatermark() {
        assertEquals(0, entries.pop());
        assertEquals(1, entries.pop());
        assertEquals(2, entries.watermark());
        entries.push(0);
        assertEquals(0, entries.pop(), "a freed record is reused before a fresh one");
        assertEquals(2, entries.pop());
        for (int i = 3; i < 16; i++) {
            assertEquals(i, entries.pop());
        }
        assertEquals(EntryTable.NONE, entries.pop());
    }

    @Test
    void aFreeListHeadNamingNoRecordIsReportedForRepair() {
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_FREE_HEAD, 1000);
        assertEquals(EntryTable.CORRUPT_LIST, entries.pop());
        assertEquals(0, entries.resetFreeList(), "a rebuild keeps a watermark in range");
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_ENTRY_WATERMARK, 1000);
        assertEquals(16, entries.resetFreeList(), "and rebuilds the whole table below one out of range");
        assertEquals(EntryTable.NONE, entries.pop(), "whose records the rebuild then pushes as it drops them");
    }

    @Test
    void beginFillsTheRecordAndStartsANewGenerationThenCommitPublishes() {
        KeyScratch k = KeyScratch.encode("key-1");
        long before = entries.stateWord(3);
        entries.begin(3, k, 5, 2, 100, 42);
        long writing = entries.stateWord(3);
        assertEquals(ShmLayout.WRITING, entries.state(3));
        assertEquals((before >>> 8) + 1, writing >>> 8, "a new generation");
        assertEquals(5 * 64, entries.payloadOffset(3));
        assertEquals(2, entries.blocks(3));
        assertEquals(100, entries.valueLength(3));
        assertEquals(ProcessIdentity.SELF, entries.owner(3));
        assertEquals(42, entries.startedMillis(3));
        assertTrue(entries.keyMatches(3, k));
        assertFalse(entries.keyMatches(3, KeyScratch.encode("key-2")));
        entries.commit(3, 1000, 7);
        assertEquals(ShmLayout.COMMITTED, entries.state(3));
        assertEquals(writing >>> 8, entries.stateWord(3) >>> 8, "the commit keeps the generation");
        assertEquals(7, entries.commitSeq(3));
        assertTrue(entries.expired(3, 1000));
        assertFalse(entries.expired(3, 999));
        entries.begin(3, k, 5, 2, 100, 42);
        assertNotEquals(writing, entries.stateWord(3), "reuse gives another state word");
    }

    @Test
    void sameKeyComparesTwoRecords() {
        entries.begin(0, KeyScratch.encode("a"), 0, 1, 1, 0);
        entries.begin(1, KeyScratch.encode("a"), 1, 1, 1, 0);
        entries.begin(2, KeyScratch.encode("b"), 2, 1, 1, 0);
        assertTrue(entries.sameKey(0, 1));
        assertFalse(entries.sameKey(0, 2));
    }

    @Test
    void theReadMarkGivesOneSecondChance() {
        entries.begin(0, KeyScratch.encode("a"), 0, 1, 1, 0);
        assertFalse(entries.clearReferenced(0));
        entries.markReferenced(0);
        assertTrue(entries.clearReferenced(0));
        assertFalse(entries.clearReferenced(0));
    }

    @Test
    void payloadNumbersOutsideThePayloadAreaAreCaught() {
        long cap = b.lay.capacity();
        assertTrue(entries.payloadInBounds(0, 1, 64));
        assertTrue(entries.payloadInBounds(cap - 64, 1, 1));
        assertFalse(entries.payloadInBounds(cap, 1, 1), "past the end");
        assertFalse(entries.payloadInBounds(32, 1, 1), "not on a block");
        assertFalse(entries.payloadInBounds(0, 1, 65), "longer than its blocks");
        assertFalse(entries.payloadInBounds(-64, 1, 1));
        assertFalse(entries.payloadInBounds(0, Long.MAX_VALUE, 1), "no overflow on a huge block count");
    }
}
