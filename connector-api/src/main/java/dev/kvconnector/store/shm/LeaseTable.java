package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.CLAIMED;
import static dev.kvconnector.store.shm.ShmLayout.LEASES_PER_PROC;
import static dev.kvconnector.store.shm.ShmLayout.PROC_SLOTS;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process table: one slot per open store instance, owned by its process's token, and in each slot the lease
 * records of that instance's reads in flight and views held (hazard pointers in the file: a record names the entry
 * it keeps from being freed). Needs no lock: slots and records change by CAS and volatile stores, and a dead
 * process's slot is taken over by CAS before it is cleared.
 */
final class LeaseTable {
    private static final Logger LOG = LoggerFactory.getLogger(LeaseTable.class);
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment map;
    private final ShmLayout lay;

    LeaseTable(MemorySegment map, ShmLayout lay) {
        this.map = map;
        this.lay = lay;
    }

    /** Takes a free slot for this process, reaping dead processes' slots once if none is free; -1 when all are live. */
    int claimSlot() {
        for (int round = 0; round < 2; round++) {
            for (int p = 0; p < PROC_SLOTS; p++) {
                long off = lay.proc(p);
                if ((long) LONG.getVolatile(map, off) == 0 && LONG.compareAndSet(map, off, 0L, ProcessIdentity.SELF)) {
                    return p;
                }
            }
            reapDead();
        }
        return -1;
    }

    /**
     * Takes a slot, as {@link #claimSlot()} does.
     *
     * @throws KVException BUSY when all {@value ShmLayout#PROC_SLOTS} slots belong to live store instances
     */
    int claimSlotOrThrow(Path path, String uri) {
        int p = claimSlot();
        if (p < 0) {
            throw KVException.of(ErrorCode.BUSY, path + " is open in " + PROC_SLOTS + " live store instances already")
                    .store(uri).operation("open").hint("close stores in other processes; each open store takes a slot")
                    .build();
        }
        return p;
    }

    /** Gives slot {@code p} back; its records must be clear. */
    void releaseSlot(int p) {
        LONG.setVolatile(map, lay.proc(p), 0L);
    }

    /**
     * Frees the slots and leases of dead processes. The reaper first takes the slot over with a CAS (so two reapers
     * never both clear it, and no new process claims it half-cleared), clears the leases, then frees the slot. A
     * reaper that dies half-way leaves a slot owned by a dead process: reaped again.
     */
    void reapDead() {
        for (int p = 0; p < PROC_SLOTS; p++) {
            long owner = (long) LONG.getVolatile(map, lay.proc(p));
            if (owner != 0 && !ProcessIdentity.isAlive(owner)
                    && LONG.compareAndSet(map, lay.proc(p), owner, ProcessIdentity.SELF)) {
                for (int l = 0; l < LEASES_PER_PROC; l++) {
                    LONG.setVolatile(map, lay.lease(p, l), 0L);
                }
                LONG.setVolatile(map, lay.proc(p), 0L);
                LOG.info("reclaimed the process slot and leases of dead process {}", ProcessIdentity.pid(owner));
            }
        }
    }

    /**
     * Sets {@code k}'s lease record in slot {@code p} to {@code value}, first taking a free record when the thread
     * holds none (spinning, then yielding, while all are in use).
     */
    void set(int p, KeyScratch k, long value) {
        if (k.leaseOffset >= 0) {
            LONG.setVolatile(map, k.leaseOffset, value);
            return;
        }
        int start = (int) (Thread.currentThread().threadId() % LEASES_PER_PROC);
        for (int spins = 0; ; spins++) {
            for (int j = 0; j < LEASES_PER_PROC; j++) {
                long off = lay.lease(p, (start + j) % LEASES_PER_PROC);
                if ((long) LONG.get(map, off) == 0 && LONG.compareAndSet(map, off, 0L, value)) {
                    k.leaseOffset = off;
                    return;
                }
            }
            if (spins > 100) {
                Thread.yield();
            } else {
                Thread.onSpinWait();
            }
        }
    }

    /** Keeps {@code k}'s record but names no entry in it, as a probe that moves on to the next slot does. */
    void unname(KeyScratch k) {
        LONG.setVolatile(map, k.leaseOffset, CLAIMED);
    }

    /** Clears {@code k}'s record, which names no entry, and gives it back. */
    void drop(KeyScratch k) {
        if (k.leaseOffset >= 0) {
            LONG.setVolatile(map, k.leaseOffset, 0L);
            k.leaseOffset = -1;
        }
    }

    /** Clears the record at {@code off}; returns the entry it named, or -1. */
    int clear(long off) {
        long held = (long) LONG.get(map, off);
        LONG.setVolatile(map, off, 0L);
        return held > 0 ? (int) (held - 1) : -1;
    }

    /** Clears every record of slot {@code p} at once; writes the entries they named into {@code named}, returns how many. */
    int clearAll(int p, long[] named) {
        int n = 0;
        for (int l = 0; l < LEASES_PER_PROC; l++) {
            long held = (long) LONG.getAndSet(map, lay.lease(p, l), 0L);
            if (held > 0) {
                named[n++] = held - 1;
            }
        }
        return n;
    }

    /** Whether any live slot's record names entry {@code e}. */
    boolean leased(int e) {
        long want = e + 1L;
        for (int p = 0; p < PROC_SLOTS; p++) {
            if ((long) LONG.getVolatile(map, lay.proc(p)) == 0) {
                continue;
            }
            for (int l = 0; l < LEASES_PER_PROC; l++) {
                if ((long) LONG.getVolatile(map, lay.lease(p, l)) == want) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Records naming an entry, over all slots. */
    int held() {
        int n = 0;
        for (int p = 0; p < PROC_SLOTS; p++) {
            for (int l = 0; l < LEASES_PER_PROC; l++) {
                if ((long) LONG.getVolatile(map, lay.lease(p, l)) > 0) {
                    n++;
                }
            }
        }
        return n;
    }
}
