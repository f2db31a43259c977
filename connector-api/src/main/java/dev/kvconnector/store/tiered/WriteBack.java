package dev.kvconnector.store.tiered;

import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.collections.Hashing;
import org.agrona.collections.Object2ObjectHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Copies objects from a tiered store's first tier to the tiers below it on I/O threads, after the put that the
 * first tier acknowledged.
 *
 * <p>The queue holds keys, not bytes: a write-back reads the object from the first tier when it goes out (in place
 * through a view when the first tier has {@link StoreCapability#VIEW}), so a key put again before that goes out
 * once with its newest value, and waiting write-backs cost no memory. An object that the first tier evicts or
 * expires before its turn is lost to the lower tiers and counted. The queue is bounded: a put into a full queue
 * either drops the oldest waiting write-back (counted) or is refused. A write to a lower tier that fails is retried
 * at the back of the queue after a back-off that doubles up to {@link #MAX_BACKOFF_NANOS}, so a lower tier that is
 * down fills the queue, and one that comes back drains it.
 *
 * <p>Removal wins over write-back: {@link #cancel} takes a waiting write-back out of the queue, and one already
 * going out removes what it wrote once it is done. Thread-safe.
 */
final class WriteBack implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(WriteBack.class);
    static final long MIN_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(2);
    private static final long BUFFER_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final int WRITTEN = 0;
    private static final int GONE = 1;
    private static final int RETRY = 2;
    private static final int GIVE_UP = 3;

    private final KVStore source;
    private final KVStore[] tiers;
    private final TierStats[] stats;
    private final int capacity;
    private final boolean dropOldest;
    private final SegmentPool buffers;
    private final long bufferBytes;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition();
    private final Condition idle = lock.newCondition();
    private final ArrayDeque<Pending> queue;
    private final ArrayDeque<Pending> free;
    private final Object2ObjectHashMap<String, Pending> byKey;
    private final Thread[] threads;
    private int reserved;
    private int sending;
    private boolean stopping;
    private long written;
    private long dropped;
    private long lost;
    private long failed;
    private long refused;
    private String lastFailure;

    /** A key waiting to be written back, or going out; reused from {@link #free}. Guarded by {@link #lock}. */
    private static final class Pending {
        String key;
        PutOptions options;
        boolean going;
        boolean again;
        boolean cancelled;
        int failures;
        long notBefore;
        String failure;

        void clear() {
            key = null;
            options = null;
            going = again = cancelled = false;
            failures = 0;
            notBefore = 0;
            failure = null;
        }
    }

    /**
     * @param tiers   every tier; the first is read, the others written
     * @param stats   per tier, aligned with {@code tiers}
     * @param buffers memory for reading from a first tier without views
     */
    WriteBack(KVStore[] tiers, TierStats[] stats, TieredOptions options, SegmentPool buffers) {
        this.source = tiers[0];
        this.tiers = tiers;
        this.stats = stats;
        this.capacity = options.queueCapacity();
        this.dropOldest = options.dropOldest();
        this.buffers = buffers;
        this.bufferBytes = options.bufferBytes();
        this.queue = new ArrayDeque<>(capacity);
        this.free = new ArrayDeque<>(capacity);
        this.byKey = new Object2ObjectHashMap<>(capacity * 2, Hashing.DEFAULT_LOAD_FACTOR);
        this.threads = new Thread[options.threads()];
        for (int i = 0; i < threads.length; i++) {
            threads[i] = Thread.ofPlatform().daemon().name("kvc-tiered-write-back-" + i).unstarted(this::run);
        }
        for (Thread t : threads) {
            t.start();
        }
    }

    /**
     * Holds a place in the queue for a put about to go into the first tier, so that a refusing queue refuses before
     * anything is stored. Always succeeds when the queue drops its oldest instead.
     *
     * @return false when the queue refuses: it is full
     */
    boolean reserve() {
        lock.lock();
        try {
            if (!dropOldest && queue.size() + reserved >= capacity) {
                refused++;
                return false;
            }
            reserved++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Gives back a place from {@link #reserve} whose put stored nothing. */
    void unreserve() {
        lock.lock();
        try {
            reserved--;
        } finally {
            lock.unlock();
        }
    }

    /** Queues the write-back of {@code key}, which the first tier now holds, in the place {@link #reserve} held. */
    void offer(String key, PutOptions options) {
        lock.lock();
        try {
            reserved--;
            Pending p = byKey.get(key);
            if (p != null) {
                p.options = options;
                if (p.going) {
                    p.again = true;
                    p.cancelled = false;
                }
                return;
            }
            if (queue.size() >= capacity) {
                forget(queue.pollFirst());
                dropped++;
            }
            p = free.isEmpty() ? new Pending() : free.pollFirst();
            p.key = key;
            p.options = options;
            queue.addLast(p);
            byKey.put(key, p);
            work.signal();
        } finally {
            lock.unlock();
        }
    }

    /** Keeps {@code key} out of the lower tiers: drops its waiting write-back, or undoes one going out. */
    void cancel(String key) {
        lock.lock();
        try {
            Pending p = byKey.get(key);
            if (p == null) {
                return;
            }
            if (p.going) {
                p.cancelled = true;
            } else {
                queue.remove(p);
                forget(p);
                idle.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Waits until nothing waits or goes out; returns whether that happened within {@code timeoutMillis}. */
    boolean awaitIdle(long timeoutMillis) throws InterruptedException {
        long left = TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        lock.lock();
        try {
            while (!queue.isEmpty() || sending > 0) {
                if (left <= 0) {
                    return false;
                }
                left = idle.awaitNanos(left);
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    private void run() {
        StoreView view = source.capabilities().contains(StoreCapability.VIEW) ? source.newView() : null;
        Pending p;
        while ((p = next()) != null) {
            finish(p, writeOut(p, view));
        }
    }

    /** The next write-back whose back-off has passed, marked as going out; null once stopping. */
    private Pending next() {
        lock.lock();
        try {
            while (!stopping) {
                Pending head = queue.peekFirst();
                long wait = head == null ? Long.MAX_VALUE : head.notBefore - System.nanoTime();
                if (head != null && wait <= 0) {
                    queue.pollFirst();
                    head.going = true;
                    sending++;
                    return head;
                }
                try {
                    if (head == null) {
                        work.await();
                    } else {
                        work.awaitNanos(wait);
                    }
                } catch (InterruptedException e) {
                    return null;
                }
            }
            return null;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Copies one object from the first tier to the others.
     *
     * @return {@link #WRITTEN}, {@link #GONE} (the first tier no longer holds it), {@link #RETRY} or
     *     {@link #GIVE_UP}, with {@code p.failure} saying why for the last two
     */
    private int writeOut(Pending p, StoreView view) {
        MemorySegment buffer = null;
        try {
            MemorySegment value;
            if (view != null) {
                if (!GetResult.isHit(source.tryView(p.key, view))) {
                    return GONE;
                }
                value = view.segment();
            } else {
                long size = source.size(p.key);
                if (size < 0) {
                    return GONE;
                }
                if (size > bufferBytes) {
                    p.failure = "the object (" + size + " bytes) is larger than the tiered store's buffer ("
                            + bufferBytes + " bytes, option buffer)";
                    return GIVE_UP;
                }
                buffer = buffers.tryAcquire(Math.max(1, size), BUFFER_WAIT_NANOS);
                if (buffer == null) {
                    p.failure = buffers.describeNoRoom(size);
                    return RETRY;
                }
                long r = source.getInto(p.key, buffer);
                if (GetResult.isMiss(r)) {
                    return GONE;
                }
                if (!GetResult.isHit(r)) {
                    p.failure = "the object grew while it was read for write-back";
                    return RETRY;
                }
                value = buffer.asSlice(0, r);
            }
            for (int i = 1; i < tiers.length; i++) {
                try {
                    tiers[i].put(p.key, value, p.options);
                    stats[i].written(value.byteSize());
                } catch (RuntimeException e) {
                    stats[i].error();
                    p.failure = "tier " + (i + 1) + " (" + tiers[i].uri() + "): " + e.getMessage();
                    return RETRY;
                }
            }
            return WRITTEN;
        } catch (RuntimeException e) {
            stats[0].error();
            p.failure = "tier 1 (" + source.uri() + ") while reading for write-back: " + e.getMessage();
            return RETRY;
        } finally {
            if (view != null && view.isHeld()) {
                view.release();
            }
            if (buffer != null) {
                buffers.release(buffer);
            }
        }
    }

    /**
     * Books a write-back's outcome. One cancelled while it went out is first undone in the lower tiers, while it
     * still counts as going out, so that {@link #awaitIdle} never returns before the undo.
     */
    private void finish(Pending p, int outcome) {
        String key = p.key;
        boolean undone = false;
        while (true) {
            lock.lock();
            try {
                if (!p.cancelled || undone) {
                    book(p, outcome);
                    return;
                }
            } finally {
                lock.unlock();
            }
            removeBelow(key);
            undone = true;
        }
    }

    /** Requeues a write-back that failed or was put again, or forgets it. Under {@link #lock}. */
    private void book(Pending p, int outcome) {
        sending--;
        p.going = false;
        boolean cancelled = p.cancelled;
        if (outcome == RETRY || outcome == GIVE_UP) {
            failed++;
            lastFailure = p.failure;
        }
        if (outcome == RETRY && !cancelled && !stopping) {
            p.failures++;
            p.notBefore = System.nanoTime()
                    + Math.min(MAX_BACKOFF_NANOS, MIN_BACKOFF_NANOS << Math.min(20, p.failures - 1));
            queue.addLast(p);
            work.signal();
        } else if (p.again && !cancelled && outcome != GIVE_UP) {
            p.again = false;
            p.notBefore = 0;
            queue.addLast(p);
            work.signal();
        } else {
            written += outcome == WRITTEN && !cancelled ? 1 : 0;
            lost += outcome == GONE && !cancelled ? 1 : 0;
            forget(p);
        }
        idle.signalAll();
    }

    private void removeBelow(String key) {
        for (int i = 1; i < tiers.length; i++) {
            try {
                tiers[i].remove(key);
            } catch (RuntimeException e) {
                LOG.warn("could not undo the write-back of {} to {} after its removal: {}", key, tiers[i].uri(),
                        e.getMessage());
            }
        }
    }

    /** Takes {@code p} out of the index and back to the free list. Under {@link #lock}. */
    private void forget(Pending p) {
        byKey.remove(p.key);
        p.clear();
        free.addLast(p);
    }

    /** Objects waiting to be written back or going out now. */
    int depth() {
        lock.lock();
        try {
            return queue.size() + sending;
        } finally {
            lock.unlock();
        }
    }

    WriteBackStats snapshot() {
        lock.lock();
        try {
            return new WriteBackStats(queue.size() + sending, capacity, written, dropped, lost, failed, refused,
                    lastFailure);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits up to {@code drainMillis} for waiting write-backs, then stops the I/O threads; what is still waiting is
     * dropped, counted and logged.
     */
    void close(long drainMillis) {
        try {
            if (!awaitIdle(drainMillis)) {
                LOG.warn("closing with {} write-back(s) not written to the lower tiers after {} ms; last failure: {}",
                        depth(), drainMillis, lastFailure);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        lock.lock();
        try {
            stopping = true;
            dropped += queue.size();
            while (!queue.isEmpty()) {
                forget(queue.pollFirst());
            }
            work.signalAll();
        } finally {
            lock.unlock();
        }
        for (Thread t : threads) {
            t.interrupt();
            try {
                t.join(TimeUnit.SECONDS.toMillis(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    @Override
    public void close() {
        close(0);
    }
}
