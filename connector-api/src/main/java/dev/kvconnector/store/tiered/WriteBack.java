package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.collections.Hashing;
import org.agrona.collections.Object2ObjectHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Brings a tiered store's lower tiers up to date on I/O threads: copies objects from the first tier to the tiers
 * below it after the put that the first tier acknowledged (write-back), and retries removals that a lower tier
 * failed, in either write mode.
 *
 * <p>The queue holds keys, not bytes: a write-back reads the object from the first tier when it goes out (in place
 * through a view when the first tier has {@link StoreCapability#VIEW}), so a key put again before that goes out
 * once with its newest value, and waiting write-backs cost no memory. An object that the first tier evicts or
 * expires before its turn is lost to the lower tiers and counted. The queue is bounded: a put into a full queue
 * either drops the oldest waiting entry (counted) or is refused. A write to a lower tier that fails is retried
 * at the back of the queue after a back-off that doubles up to {@link #MAX_BACKOFF_NANOS}, so a lower tier that is
 * down fills the queue, and one that comes back drains it.
 *
 * <p>Removal wins over write-back: {@link #cancel} takes a waiting write-back out of the queue, and one already
 * going out removes what it wrote once it is done. A removal that a lower tier failed ({@link #retryRemoval}) waits
 * in the same queue, with the same back-off, until the tier takes it; meanwhile the tiered store reads that key from
 * no lower tier ({@link #removing}). A later put wins over it ({@link #supersede}, {@link #offer}): a waiting
 * removal is dropped, and one going out is followed by a write-back of the new value from the first tier. A removal
 * never waits for room: a full queue drops its oldest entry instead, whatever the overflow setting. Every drop is
 * counted against each tier it was for; the first failure of each entry and every drop go to the tiered store's
 * error handler. Thread-safe.
 *
 * <p>Over 400 lines because write-backs and removal retries share one queue, its threads and its back-off, and
 * which of them wins depends on the order of calls that only this class sees.
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
    private static final int REMOVED = 4;

    private final String uri;
    private final KVStore source;
    private final KVStore[] tiers;
    private final TierStats[] stats;
    private final Supplier<ErrorHandler> errors;
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
    /** Entries with a removal to make: {@link #removing} and {@link #supersede} lock only when there are any. */
    private volatile int removals;
    private int reserved;
    private int sending;
    private boolean stopping;
    private long written;
    private long dropped;
    private long lost;
    private long failed;
    private long refused;
    private long removed;
    private String lastFailure;

    /** A key waiting to be written back or removed below, or going out; reused from {@link #free}. */
    private static final class Pending {
        String key;
        PutOptions options;
        /** Lower tiers (bit i for tier i) that have yet to remove the key; 0 for a write-back. */
        int removeMask;
        boolean going;
        boolean again;
        boolean cancelled;
        /** A removal whose failure was reported already (a call to the tiered store failed it inline). */
        boolean retried;
        int failures;
        long notBefore;
        String failure;
        /** What threw, for the error handler; null when the failure threw nothing. */
        RuntimeException error;

        boolean isRemoval() {
            return removeMask != 0;
        }

        void clear() {
            key = null;
            options = null;
            removeMask = 0;
            going = again = cancelled = retried = false;
            failures = 0;
            notBefore = 0;
            failure = null;
            error = null;
        }
    }

    /**
     * @param uri     the tiered store's URI, for messages
     * @param tiers   every tier; the first is read, the others written
     * @param stats   per tier, aligned with {@code tiers}
     * @param buffers memory for reading from a first tier without views
     * @param errors  the tiered store's error handler, read at each report
     */
    WriteBack(String uri, KVStore[] tiers, TierStats[] stats, TieredOptions options, SegmentPool buffers,
              Supplier<ErrorHandler> errors) {
        this.uri = uri;
        this.source = tiers[0];
        this.tiers = tiers;
        this.stats = stats;
        this.errors = errors;
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
        Pending drop = null;
        lock.lock();
        try {
            reserved--;
            if (!supersedeLocked(key, options)) {
                drop = enqueue(key, options, 0);
            }
        } finally {
            lock.unlock();
        }
        reportDrop(drop);
    }

    /**
     * A put of {@code key} reached every tier (write-through): it wins over a removal of the key below that waits
     * (dropped) or goes out (followed by a write-back of the new value).
     */
    void supersede(String key, PutOptions options) {
        if (removals == 0) {
            return;
        }
        lock.lock();
        try {
            Pending p = byKey.get(key);
            if (p != null && p.isRemoval()) {
                supersedeLocked(key, options);
            }
        } finally {
            lock.unlock();
        }
    }

    /** Makes what is pending for {@code key} end with its new value below; false when nothing is pending. */
    private boolean supersedeLocked(String key, PutOptions options) {
        Pending p = byKey.get(key);
        if (p == null) {
            return false;
        }
        p.options = options;
        if (p.going) {
            p.again = true;
            p.cancelled = false;
        } else if (p.isRemoval()) {
            setMask(p, 0);
            p.failures = 0;
            p.notBefore = 0;
        }
        return true;
    }

    /**
     * Queues the removal of {@code key} from the lower tiers of {@code tierMask} (bit i for tier i), which failed
     * it; {@link #cancel} was called for the key first. A removal of the key already pending takes these tiers on.
     *
     * @param failure what the first of those tiers threw, for the error handler
     */
    void retryRemoval(String key, int tierMask, RuntimeException failure) {
        retryRemovals(new String[] {key}, 1, tierMask, failure);
    }

    /** {@link #retryRemoval} of {@code count} keys from the tiers of {@code tierMask}, reported once. */
    void retryRemovals(String[] keys, int count, int tierMask, RuntimeException failure) {
        List<Pending> drops = new ArrayList<>(0);
        lock.lock();
        try {
            for (int k = 0; k < count; k++) {
                Pending p = byKey.get(keys[k]);
                if (p != null) {
                    // A removal waiting or going out, or a cancelled write-back going out, which undoes itself.
                    setMask(p, p.removeMask | tierMask);
                    p.again = false;
                } else {
                    Pending d = enqueue(keys[k], null, tierMask);
                    if (d != null) {
                        drops.add(d);
                    }
                    p = byKey.get(keys[k]);
                }
                p.retried = true;
            }
        } finally {
            lock.unlock();
        }
        report("removing " + (count == 1 ? keys[0] : count + " objects (the first " + keys[0] + ")") + " from "
                + tierNames(tierMask) + " failed; retrying in the background", failure);
        drops.forEach(this::reportDrop);
    }

    /**
     * Queues the removal of the first keys of {@code keys} from the lower tiers of {@code tierMask} (bit i for tier
     * i), as many as the queue has room for, without dropping anything; {@link #cancel} was called for each key
     * first. A removal of a key already pending takes these tiers on.
     *
     * @return how many of the keys, from the first, are queued: the caller removes the others itself
     */
    int queueRemovals(String[] keys, int count, int tierMask) {
        lock.lock();
        try {
            int k = 0;
            for (; k < count; k++) {
                Pending p = byKey.get(keys[k]);
                if (p != null) {
                    setMask(p, p.removeMask | tierMask);
                    p.again = false;
                } else if (queue.size() + reserved < capacity) {
                    enqueue(keys[k], null, tierMask);
                } else {
                    break;
                }
            }
            return k;
        } finally {
            lock.unlock();
        }
    }

    /** Whether a removal of {@code key} from a lower tier waits or goes out: that tier may still hold the key. */
    boolean removing(String key) {
        if (removals == 0) {
            return false;
        }
        lock.lock();
        try {
            Pending p = byKey.get(key);
            return p != null && p.isRemoval();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds a write-back ({@code removeMask} 0) or a removal at the back; a full queue drops its oldest entry first.
     * Under the lock.
     *
     * @return the entry dropped, cleared but for its key and mask, to report outside the lock; or null
     */
    private Pending enqueue(String key, PutOptions options, int removeMask) {
        Pending dropped = null;
        if (queue.size() >= capacity) {
            Pending oldest = queue.pollFirst();
            dropped = new Pending();
            dropped.key = oldest.key;
            dropped.removeMask = oldest.removeMask;
            drop(oldest);
            forget(oldest);
        }
        Pending p = free.isEmpty() ? new Pending() : free.pollFirst();
        p.key = key;
        p.options = options;
        setMask(p, removeMask);
        queue.addLast(p);
        byKey.put(key, p);
        work.signal();
        return dropped;
    }

    /** Counts an entry that will not go out against the write-back or each tier it was for. Under the lock. */
    private void drop(Pending p) {
        dropped++;
        int mask = p.isRemoval() ? p.removeMask : lowerTiers();
        for (int i = 1; i < tiers.length; i++) {
            if ((mask & (1 << i)) != 0) {
                stats[i].dropped();
            }
        }
    }

    /** Sets an entry's removal mask, keeping {@link #removals} the count of entries with one. Under the lock. */
    private void setMask(Pending p, int mask) {
        if (p.isRemoval() != (mask != 0)) {
            removals += mask != 0 ? 1 : -1;
        }
        p.removeMask = mask;
    }

    private int lowerTiers() {
        return ((1 << tiers.length) - 1) & ~1;
    }

    /**
     * Keeps {@code key} out of the lower tiers: drops its waiting write-back, or undoes one going out. An undo to come
     * counts as a removal at once ({@link #removing}), so that the store reads no lower tier that the write-back going
     * out reaches before its undo.
     */
    void cancel(String key) {
        lock.lock();
        try {
            Pending p = byKey.get(key);
            if (p == null || p.isRemoval()) {
                return;
            }
            if (p.going) {
                p.cancelled = true;
                p.again = false;
                setMask(p, lowerTiers());
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

    /** The next entry whose back-off has passed, marked as going out; null once stopping. */
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
     * Copies one object from the first tier to the others, or, for a removal, removes it from the tiers left.
     *
     * @return {@link #WRITTEN}, {@link #GONE} (the first tier no longer holds it), {@link #RETRY} or
     *     {@link #GIVE_UP}, with {@code p.failure} saying why for the last two; for a removal, what
     *     {@link #removeBelow} returns
     */
    private int writeOut(Pending p, StoreView view) {
        if (p.isRemoval()) {
            return removeBelow(p);
        }
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
                    p.error = e;
                    return RETRY;
                }
            }
            return WRITTEN;
        } catch (RuntimeException e) {
            stats[0].error();
            p.failure = "tier 1 (" + source.uri() + ") while reading for write-back: " + e.getMessage();
            p.error = e;
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
     * Removes the key from the tiers of {@code p}'s mask, clearing the bit of each that took it; tiers added to the
     * mask meanwhile stay in it.
     *
     * @return {@link #REMOVED} once no tier is left, else {@link #RETRY} with {@code p.failure} saying why
     */
    private int removeBelow(Pending p) {
        int todo;
        lock.lock();
        try {
            todo = p.removeMask;
        } finally {
            lock.unlock();
        }
        int failedMask = 0;
        for (int i = 1; i < tiers.length; i++) {
            if ((todo & (1 << i)) == 0) {
                continue;
            }
            try {
                tiers[i].remove(p.key);
            } catch (RuntimeException e) {
                stats[i].error();
                failedMask |= 1 << i;
                p.failure = "removing from tier " + (i + 1) + " (" + tiers[i].uri() + "): " + e.getMessage();
                p.error = e;
            }
        }
        lock.lock();
        try {
            setMask(p, p.removeMask & ~todo | failedMask);
            return p.isRemoval() ? RETRY : REMOVED;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Books an outcome. A write-back cancelled while it went out is first undone (removed from every lower tier),
     * while it still counts as going out, so that {@link #awaitIdle} never returns before the undo; a tier that
     * fails the undo keeps the entry as a removal to retry.
     */
    private void finish(Pending p, int outcome) {
        boolean undo;
        lock.lock();
        try {
            undo = p.cancelled;
            if (undo) {
                p.cancelled = false;
                setMask(p, p.removeMask | lowerTiers());
            }
        } finally {
            lock.unlock();
        }
        int result = undo ? removeBelow(p) : outcome;
        String firstFailure = null;
        RuntimeException cause = null;
        lock.lock();
        try {
            // A removal that failed inline was reported by retryRemovals; a write-back, an undo or a removal queued
            // for a consumed object was not.
            if ((result == RETRY || result == GIVE_UP) && p.failures == 0 && (undo || !p.isRemoval() || !p.retried)) {
                firstFailure = "the " + (p.isRemoval() ? "removal" : "write-back") + " of " + p.key + " failed ("
                        + p.failure + ")" + (result == RETRY ? "; retrying it in the background" : "; given up");
                cause = p.error;
            }
            book(p, result);
        } finally {
            lock.unlock();
        }
        if (firstFailure != null) {
            report(firstFailure, cause);
        }
    }

    /**
     * Requeues an entry that failed or was put again, or forgets it. Under {@link #lock}.
     */
    private void book(Pending p, int outcome) {
        sending--;
        p.going = false;
        if (outcome == RETRY || outcome == GIVE_UP) {
            failed++;
            lastFailure = p.failure;
        }
        boolean retry = outcome == RETRY && !stopping;
        if (p.again && outcome != GIVE_UP && !stopping) {
            // A put came while it went out: what goes below next is the newest value.
            p.again = false;
            setMask(p, 0);
            requeue(p, retry);
        } else if (retry) {
            requeue(p, true);
        } else {
            removed += outcome == REMOVED ? 1 : 0;
            written += outcome == WRITTEN ? 1 : 0;
            lost += outcome == GONE ? 1 : 0;
            if (outcome == RETRY) {
                drop(p);
            }
            setMask(p, 0);
            forget(p);
        }
        idle.signalAll();
    }

    /** Puts {@code p} back at the end of the queue, after a back-off when it failed. Under {@link #lock}. */
    private void requeue(Pending p, boolean backOff) {
        if (backOff) {
            p.failures++;
            p.notBefore = System.nanoTime()
                    + Math.min(MAX_BACKOFF_NANOS, MIN_BACKOFF_NANOS << Math.min(20, p.failures - 1));
        } else {
            p.failures = 0;
            p.notBefore = 0;
        }
        queue.addLast(p);
        work.signal();
    }

    /** Takes {@code p} out of the index and back to the free list. Under {@link #lock}. */
    private void forget(Pending p) {
        byKey.remove(p.key);
        p.clear();
        free.addLast(p);
    }

    /** Entries waiting or going out now: write-backs and removals. */
    int depth() {
        lock.lock();
        try {
            return queue.size() + sending;
        } finally {
            lock.unlock();
        }
    }

    /** Entries waiting or going out now that tier {@code tier} has yet to take: its part of the queue. */
    int depthFor(int tier) {
        lock.lock();
        try {
            int n = 0;
            for (Pending p : byKey.values()) {
                n += ((p.isRemoval() ? p.removeMask : lowerTiers()) & (1 << tier)) != 0 ? 1 : 0;
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    WriteBackStats snapshot() {
        lock.lock();
        try {
            return new WriteBackStats(queue.size() + sending, capacity, written, dropped, lost, failed, refused,
                    lastFailure, removals, removed);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits up to {@code drainMillis} for waiting write-backs and removals, then stops the I/O threads; what is
     * still waiting is dropped, counted and logged.
     */
    void close(long drainMillis) {
        try {
            if (!awaitIdle(drainMillis)) {
                LOG.warn("closing {} with {} write-back(s) and removal(s) not done in the lower tiers after {} ms; last"
                        + " failure: {}", uri, depth(), drainMillis, lastFailure);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        lock.lock();
        try {
            stopping = true;
            while (!queue.isEmpty()) {
                Pending p = queue.pollFirst();
                drop(p);
                setMask(p, 0);
                forget(p);
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

    /** Hands a failure to the tiered store's error handler; a handler that throws is ignored. */
    private void report(String what, RuntimeException cause) {
        try {
            errors.get().onError(uri + ": " + what, cause != null ? cause
                    : KVException.of(ErrorCode.STORE_ERROR, what).store(uri).operation("write-back").build());
        } catch (RuntimeException ignored) {
            // The handler is for monitoring; it failing must not stop the queue.
        }
    }

    private void reportDrop(Pending d) {
        if (d != null) {
            report("the queue of " + capacity + " entries is full: dropped the oldest, the " + (d.isRemoval()
                    ? "removal of " + d.key + " from " + tierNames(d.removeMask) + ", which may keep it"
                    : "write-back of " + d.key + ", which the lower tiers will not get"), null);
        }
    }

    private String tierNames(int mask) {
        StringBuilder b = new StringBuilder();
        for (int i = 1; i < tiers.length; i++) {
            if ((mask & (1 << i)) != 0) {
                b.append(b.isEmpty() ? "" : ", ").append("tier ").append(i + 1).append(" (").append(tiers[i].uri())
                        .append(')');
            }
        }
        return b.toString();
    }
}
