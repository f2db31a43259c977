package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** {@link ClockEviction} through the allocations that need it: four blocks, each value takes one. */
class ClockEvictionTest {
    @Test
    void theOldestUnreadEntryGoesFirstAndAReadOneGetsASecondChance() {
        try (ShmPartsBench b = new ShmPartsBench(4 * 64, 64, 16, true)) {
            int[] e = new int[4];
            for (int i = 0; i < 4; i++) {
                e[i] = b.commit("k" + i, 64, 0);
            }
            b.entries.markReferenced(e[0]);
            b.commit("k4", 64, 0);
            assertEquals(e[0], b.find("k0"), "read since the hand passed: kept");
            assertEquals(-1, b.find("k1"), "the oldest unread: evicted");
            assertEquals(e[2], b.find("k2"));
        }
    }

    @Test
    void aLeasedEntryIsNeverEvicted() {
        try (ShmPartsBench b = new ShmPartsBench(2 * 64, 64, 16, true)) {
            int first = b.commit("k0", 64, 0);
            b.commit("k1", 64, 0);
            KeyScratch reader = new KeyScratch();
            b.leases.set(b.procSlot, reader, first + 1L);
            b.commit("k2", 64, 0);
            assertEquals(first, b.find("k0"), "leased: skipped");
            assertEquals(-1, b.find("k1"));
            assertEquals(ShmSpace.NO_RUN, b.commit("k3", 128, 0), "nothing else may go");
        }
    }

    @Test
    void refuseEvictsOnlyWhatNoOneCanReadAnyMore() {
        try (ShmPartsBench b = new ShmPartsBench(3 * 64, 64, 16, false)) {
            b.commit("live", 64, 0);
            b.commit("expired", 64, 1);
            int dead = b.entries.pop();
            b.lock.lock();
            try {
                long first = b.blocks.allocate(1);
                b.entries.begin(dead, KeyScratch.encode("dead"), first, 1, 64, 0);
                b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(dead) + ShmLayout.E_OWNER, ShmPartsBench.DEAD);
            } finally {
                b.lock.unlock();
            }
            assertEquals(0, b.freeBlocks());
            assertTrue(b.commit("a", 64, 0) >= 0, "the expired entry or the dead writer's put makes room");
            assertTrue(b.commit("b", 64, 0) >= 0, "and then the other");
            assertEquals(-1, b.find("expired"));
            assertTrue(b.entries.state(dead) != ShmLayout.WRITING || b.entries.owner(dead) != ShmPartsBench.DEAD,
                    "the dead writer's put was reclaimed");
            assertEquals(ShmSpace.NO_RUN, b.commit("c", 64, 0), "a live committed entry is never evicted");
            assertTrue(b.find("live") >= 0);
        }
    }
}
