package dev.kvconnector.mooncake;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Equal slots of one registered staging region, lent to transfers whose caller memory is not registered. A
 * semaphore hands out several slots at once, so batches that need many never deadlock against each other. A claim
 * or a view of the store holds one slot until its commit, abort or release.
 */
final class StagingPool {
    private static final long POLL_MILLIS = 100;

    private final Semaphore permits;
    private final ConcurrentLinkedQueue<MemorySegment> free = new ConcurrentLinkedQueue<>();
    private final long slotBytes;
    private final int slots;

    StagingPool(MemorySegment region, int slots) {
        this.slots = slots;
        this.slotBytes = region.byteSize() / slots;
        for (int i = 0; i < slots; i++) {
            free.add(region.asSlice(i * slotBytes, slotBytes));
        }
        this.permits = new Semaphore(slots, true);
    }

    /** Bytes per slot. */
    long slotBytes() {
        return slotBytes;
    }

    /** Number of slots. */
    int slots() {
        return slots;
    }

    /** Slots not lent out now. */
    int available() {
        return permits.availablePermits();
    }

    /**
     * Takes {@code n} slots into {@code out[0..n)}, waiting while others hold them; gives up when {@code closed}
     * turns true.
     */
    void acquire(MemorySegment[] out, int n, BooleanSupplier closed, String maskedUri) {
        try {
            while (!permits.tryAcquire(n, POLL_MILLIS, TimeUnit.MILLISECONDS)) {
                if (closed.getAsBoolean()) {
                    throw KVException.of(ErrorCode.CLOSED, "the store closed while waiting for a staging slot")
                            .store(maskedUri).build();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw KVException.of(ErrorCode.BUSY, "interrupted while waiting for a staging slot").store(maskedUri)
                    .cause(e).build();
        }
        for (int i = 0; i < n; i++) {
            out[i] = free.poll();
        }
    }

    /** One slot if one is free now, without waiting; null otherwise. */
    MemorySegment tryAcquire() {
        return permits.tryAcquire() ? free.poll() : null;
    }

    /** Returns one slot taken by {@link #tryAcquire} or {@link #acquire}. */
    void release(MemorySegment slot) {
        free.add(slot);
        permits.release();
    }

    /** Returns {@code n} slots taken by {@link #acquire}. */
    void release(MemorySegment[] taken, int n) {
        for (int i = 0; i < n; i++) {
            free.add(taken[i]);
            taken[i] = null;
        }
        permits.release(n);
    }
}
