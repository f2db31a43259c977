package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class ShmSpaceTest {
    @Test
    void noRecordAndNoRunAreToldApartAndTakeNothing() {
        try (ShmPartsBench b = new ShmPartsBench(4 * 64, 64, 16, false)) {
            for (int i = 0; i < 16; i++) {
                b.commit("k" + i, 0, 0);
            }
            assertEquals(ShmSpace.NO_ENTRY, b.commit("more", 0, 0), "every record in use, none evictable");
        }
        try (ShmPartsBench b = new ShmPartsBench(4 * 64, 64, 16, false)) {
            b.commit("a", 3 * 64, 0);
            assertEquals(ShmSpace.NO_RUN, b.commit("b", 2 * 64, 0));
            assertEquals(1, b.entries.pop(), "the record taken for b went back to the free list");
            assertEquals(1, b.freeBlocks());
        }
    }

    @Test
    void aRetiredEntryIsFreedByItsLastReaderNotBefore() {
        try (ShmPartsBench b = new ShmPartsBench(4 * 64, 64, 16, true)) {
            int e = b.commit("a", 64, 0);
            KeyScratch reader = new KeyScratch();
            b.leases.set(b.procSlot, reader, e + 1L);
            b.index.remove(e);
            assertFalse(b.space.retire(e), "leased: retired, not freed");
            assertEquals(1, b.entries.retired());
            b.space.freeIfUnleased(e);
            assertEquals(ShmLayout.RETIRED, b.entries.state(e), "still leased");
            b.leases.clear(reader.leaseOffset);
            b.space.freeIfUnleased(e);
            assertEquals(ShmLayout.FREE, b.entries.state(e));
            assertEquals(0, b.entries.retired());
            assertEquals(4, b.freeBlocks());
        }
    }

    @Test
    void freeingAnEntryWithNumbersOutsideThePayloadRepairsTheFileInstead() {
        try (ShmPartsBench b = new ShmPartsBench(4 * 64, 64, 16, true)) {
            int good = b.commit("good", 64, 0);
            int bad = b.commit("bad", 64, 0);
            b.map.set(ValueLayout.JAVA_LONG, b.lay.entry(bad) + ShmLayout.E_BLOCKS, 1000L);
            b.space.free(bad);
            assertEquals(ShmLayout.FREE, b.entries.state(bad));
            assertEquals(good, b.find("good"), "the rebuild kept the good entry");
            assertEquals(-1, b.find("bad"));
            assertEquals(3, b.freeBlocks(), "and the bad entry's block came back");
        }
    }
}
