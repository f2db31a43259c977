package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class LeaseTableTest {
    private final ShmPartsBench b = new ShmPartsBench(1 << 16, 64, 16, true);
    private final LeaseTable leases = b.leases;

    @AfterEach
    void close() {
        b.close();
    }

    @Test
    void eachInstanceGetsItsOwnSlotUntilAllAreTaken() {
        int first = b.procSlot;
        int second = leases.claimSlot();
        assertNotEquals(first, second);
        for (int i = 2; i < ShmLayout.PROC_SLOTS; i++) {
            assertTrue(leases.claimSlot() >= 0);
        }
        assertEquals(-1, leases.claimSlot(), "64 live instances: no slot");
        leases.releaseSlot(second);
        assertEquals(second, leases.claimSlot());
    }

    @Test
    void aDeadProcessesSlotAndLeasesAreReapedAndTheSlotReused() {
        for (int i = 1; i < ShmLayout.PROC_SLOTS; i++) {
            leases.claimSlot();
        }
        int victim = 5;
        b.map.set(ValueLayout.JAVA_LONG, b.lay.proc(victim), ShmPartsBench.DEAD);
        b.map.set(ValueLayout.JAVA_LONG, b.lay.lease(victim, 3), 8L);
        assertTrue(leases.leased(7), "a dead process's lease still counts until it is found dead");
        assertEquals(victim, leases.claimSlot(), "a full table reaps the dead and hands out its slot");
        assertFalse(leases.leased(7));
        assertEquals(0, b.map.get(ValueLayout.JAVA_LONG, b.lay.lease(victim, 3)));
    }

    @Test
    void aLeaseNamesItsEntryUntilCleared() {
        KeyScratch k = KeyScratch.encode("k");
        leases.set(b.procSlot, k, 4 + 1L);
        assertTrue(k.leaseOffset >= 0);
        assertTrue(leases.leased(4));
        assertEquals(1, leases.held());
        leases.unname(k);
        assertFalse(leases.leased(4), "an unnamed record keeps no entry");
        assertEquals(0, leases.held());
        leases.set(b.procSlot, k, 9 + 1L);
        assertEquals(9, leases.clear(k.leaseOffset));
        k.leaseOffset = -1;
        assertEquals(0, leases.held());
        leases.set(b.procSlot, k, ShmLayout.CLAIMED);
        leases.drop(k);
        assertEquals(-1, k.leaseOffset);
    }

    @Test
    void clearAllReportsTheEntriesTheRecordsNamed() {
        for (int e = 0; e < 3; e++) {
            KeyScratch k = new KeyScratch();
            leases.set(b.procSlot, k, e + 1L);
        }
        long[] named = new long[ShmLayout.LEASES_PER_PROC];
        assertEquals(3, leases.clearAll(b.procSlot, named));
        assertEquals(0 + 1 + 2, named[0] + named[1] + named[2]);
        assertEquals(0, leases.held());
    }
}
