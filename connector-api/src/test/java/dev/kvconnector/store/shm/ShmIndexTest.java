package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ShmIndexTest {
    /** 16 entries, 32 slots: a rebuild comes after 24 slots are used. */
    private final ShmPartsBench b = new ShmPartsBench(1 << 16, 64, 16, true);
    private final ShmIndex index = b.index;

    @AfterEach
    void close() {
        b.close();
    }

    @Test
    void aProbeFindsTheCommittedEntryAndLeasesIt() {
        int e = b.commit("k", 10, 0);
        KeyScratch k = KeyScratch.encode("k");
        assertEquals(e, index.probe(k, b.procSlot));
        assertTrue(b.leases.leased(e), "the hit is leased until the caller releases it");
        assertEquals(b.entries.stateWord(e), k.stateWord);
        b.leases.clear(k.leaseOffset);
        k.leaseOffset = -1;
        assertEquals(1, index.live());
    }

    @Test
    void aMissLeavesNoLeaseBehind() {
        b.commit("k", 10, 0);
        KeyScratch k = KeyScratch.encode("other");
        assertEquals(ShmIndex.MISS, index.probe(k, b.procSlot));
        assertEquals(-1, k.leaseOffset);
        assertEquals(0, b.leases.held());
    }

    @Test
    void anEntryNotYetCommittedIsNotFound() {
        KeyScratch k = KeyScratch.encode("w");
        b.lock.lock();
        try {
            int e = b.space.allocate(k, 1, 10, 0);
            assertEquals(ShmLayout.WRITING, b.entries.state(e));
        } finally {
            b.lock.unlock();
        }
        assertEquals(ShmIndex.MISS, index.probe(k, b.procSlot));
    }

    @Test
    void removalLeavesATombstoneThatProbesGoPast() {
        int[] e = new int[6];
        for (int i = 0; i < e.length; i++) {
            e[i] = b.commit("key-" + i, 1, 0);
        }
        index.remove(e[2]);
        assertEquals(5, index.live());
        for (int i = 0; i < e.length; i++) {
            assertEquals(i == 2 ? -1 : e[i], b.find("key-" + i), "key-" + i);
        }
        assertEquals(1, b.map.get(ValueLayout.JAVA_LONG, ShmLayout.H_TOMBSTONES));
    }

    @Test
    void churnPastThreeQuartersOfTheSlotsRebuildsWithoutTombstonesAndLosesNoKey() {
        for (int round = 0; round < 200; round++) {
            String key = "key-" + round;
            int e = b.commit(key, 1, 0);
            assertEquals(e, b.find(key));
            if (round % 4 != 0) {
                b.lock.lock();
                try {
                    index.remove(e);
                    b.space.retire(e);
                } finally {
                    b.lock.unlock();
                }
            }
            assertTrue(b.map.get(ValueLayout.JAVA_LONG, ShmLayout.H_USED_SLOTS) <= b.lay.slotCount() * 3 / 4);
        }
        long epoch = b.map.get(ValueLayout.JAVA_LONG, ShmLayout.H_INDEX_EPOCH);
        assertTrue(epoch > 0 && epoch % 2 == 0, "rebuilt, and no rebuild left open: epoch " + epoch);
        assertEquals(index.live(), b.lay.entryCount() - countFree());
    }

    @Test
    void aRebuildPairsRivalsAndRepointsTheirSlot() {
        int first = b.commit("same", 1, 0);
        index.beginRebuild();
        index.insertFresh(first);
        int second = b.entries.pop();
        b.entries.begin(second, KeyScratch.encode("same"), 1, 1, 1, 0);
        assertEquals(first, index.rival(second));
        index.repoint(first, second);
        index.endRebuild(1);
        assertEquals(second, b.find("same"));
    }

    private long countFree() {
        long free = 0;
        for (int e = 0; e < b.lay.entryCount(); e++) {
            if (e >= b.entries.watermark() || b.entries.state(e) == ShmLayout.FREE) {
                free++;
            }
        }
        return free;
    }
}
