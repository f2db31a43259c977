package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.H_LOCK;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store lock: one word of the header, 0 or the token of the process that holds it, taken by CAS (no OS lock).
 * It guards the bitmap, the entry free list and index updates, and is held for microseconds, never during a value
 * copy. A waiter that finds the holder dead takes the lock over and runs the repair it was given (the rebuild of
 * everything the holder may have left half-changed) before it returns.
 */
final class ShmLock {
    private static final Logger LOG = LoggerFactory.getLogger(ShmLock.class);
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    /** The back-off: Agrona's {@code BackoffIdleStrategy} defaults (see {@link #lock()}). */
    private static final long LOCK_SPINS = 10;
    private static final long LOCK_YIELDS = 5;
    private static final long MIN_PARK_NANOS = 1_000;
    private static final long MAX_PARK_NANOS = 1_000_000;
    /** How often a parked waiter asks whether the lock's holder is still alive. */
    private static final long LIVENESS_CHECK_NANOS = 10_000_000;

    private final MemorySegment map;
    private final Path path;
    private final String uri;
    private final long timeoutMillis;
    private final Runnable repair;

    /**
     * @param timeoutMillis how long {@link #lock()} waits for a live holder, in ms
     * @param repair run under the lock right after taking it over from a dead holder
     */
    ShmLock(MemorySegment map, Path path, String uri, long timeoutMillis, Runnable repair) {
        this.map = map;
        this.path = path;
        this.uri = uri;
        this.timeoutMillis = timeoutMillis;
        this.repair = repair;
    }

    /**
     * Takes the store lock. A waiter spins 10 times, yields 5 times, then parks from 1 us doubling to 1 ms (the
     * parameters of Agrona's {@code BackoffIdleStrategy}, without the library); while parked it gives up after
     * {@code lock-timeout} and every 10 ms takes the lock over from a dead holder.
     *
     * <p>Why this back-off: measured with {@code ShmContentionBenchmark} (benchmarks module), 1, 2 and 4 writer
     * JVMs putting and removing 4 KiB values of their own keys in one store, 2 vCPUs at load 2 to 6, five or six
     * runs of each back-off interleaved. The lock is held for most of such an operation (0.75 us alone), so with two
     * writers it is always contended. The previous back-off, 200 spins, then yields to 2000, then 50 us parks, kept
     * every waiter on a CPU, and the writers took turns, each operation moving the lock's and the index's cache
     * lines between cores: 0.57 to 0.88 million operations a second for 2 writers and 0.39 to 0.68 for 4, against
     * 0.78 to 1.25 for one, with p99 of 3.4 to 7.6 us. With this one the loser parks and the holder runs on: 0.89 to
     * 1.17 million for 2 writers and 0.78 to 1.03 for 4 (medians 1.05 and 0.95 against 0.68 and 0.54), p99 1.3 to
     * 1.5 us for 2 and 1.2 to 5.2 us for 4, the writers using about 1.2 CPUs where the old back-off used nearly 2.
     * The cost is the rare waiter that stays parked while others keep taking the lock: p99.9 at 4 writers rose from
     * 45 to 227 us to 156 to 567 us. 10 spins and 5 yields with a fixed 50 us park did worse than both at the tail
     * (p99.9 0.7 to 1.2 ms at 4 writers). A 4 MiB value takes 100 us to copy, outside the lock, which is then too
     * rare to matter: both back-offs gave the same throughput and p99 (two runs each).
     *
     * @throws KVException TIMEOUT when a live process holds the lock for longer than the timeout
     */
    void lock() {
        long waitingSince = 0;
        long lastLivenessCheck = 0;
        long park = MIN_PARK_NANOS;
        for (long spins = 0; ; spins++) {
            long owner = (long) LONG.getVolatile(map, H_LOCK);
            if (owner == 0) {
                if (LONG.compareAndSet(map, H_LOCK, 0L, ProcessIdentity.SELF)) {
                    return;
                }
                continue;
            }
            if (spins < LOCK_SPINS) {
                Thread.onSpinWait();
            } else if (spins < LOCK_SPINS + LOCK_YIELDS) {
                Thread.yield();
            } else {
                long now = System.nanoTime();
                if (waitingSince == 0) {
                    waitingSince = now;
                    lastLivenessCheck = now;
                } else if (now - waitingSince > timeoutMillis * 1_000_000) {
                    throw timeout(owner);
                }
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, MAX_PARK_NANOS);
                if (now - lastLivenessCheck >= LIVENESS_CHECK_NANOS) {
                    lastLivenessCheck = now;
                    if (takeOverFromDead(owner)) {
                        return;
                    }
                }
            }
        }
    }

    /** Takes the lock only if it is free at once. */
    boolean tryLock() {
        return (long) LONG.getVolatile(map, H_LOCK) == 0 && LONG.compareAndSet(map, H_LOCK, 0L, ProcessIdentity.SELF);
    }

    void unlock() {
        LONG.setRelease(map, H_LOCK, 0L);
    }

    /** The token of the process that holds the lock, or 0. */
    long owner() {
        return (long) LONG.getVolatile(map, H_LOCK);
    }

    private boolean takeOverFromDead(long owner) {
        if (owner == ProcessIdentity.SELF || ProcessIdentity.isAlive(owner)
                || !LONG.compareAndSet(map, H_LOCK, owner, ProcessIdentity.SELF)) {
            return false;
        }
        LOG.warn("process {} died holding the lock of {}; repairing the store", ProcessIdentity.pid(owner), path);
        repair.run();
        return true;
    }

    private KVException timeout(long owner) {
        return KVException.of(ErrorCode.TIMEOUT, "process " + ProcessIdentity.pid(owner) + " has held the lock of "
                + path + " for more than " + timeoutMillis + " ms").store(uri)
                .hint("that process is alive but stuck (stopped with SIGSTOP, or hung): resume or kill it; or raise "
                        + "lock-timeout=").build();
    }
}
