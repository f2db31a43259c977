package dev.kvconnector.memory;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * A pool of off-heap staging segments sized to the request, so that no transfer opens an arena.
 *
 * <p>A lease is a segment of the request's size rounded up to whole pages ({@link #PAGE_BYTES}): a 4 MiB layer takes
 * 4 MiB, a 4 MiB layer with a 64-byte header 4 MiB + 4 KiB. Each size is its own class, and a released segment is
 * reused by the next lease of its class, so a steady stream of same-sized layers writes into memory that is already
 * mapped. Slice a lease to the size you need, and give the segment itself back with {@link #release}.
 *
 * <p>The pool never holds more than {@code maxBytes}. When a lease needs a new segment that would pass the bound, a
 * pool that may retire segments first frees idle segments of other classes; failing that, the smallest idle segment
 * larger than the request serves it ({@code byteSize() >= requested} always holds); if there is none,
 * {@link #tryAcquire} returns null (back-pressure, a code, no exception) and {@link #acquire} throws
 * {@code STORE_FULL}. Neither waits, because a caller holding leases while waiting could deadlock the pool.
 *
 * <pre>{@code
 * MemorySegment staging = pool.tryAcquire(bytes);
 * if (staging == null) {
 *     return BACK_PRESSURED;                 // or pool.acquire(bytes), which throws STORE_FULL
 * }
 * try {
 *     fill(staging.asSlice(0, bytes));
 * } finally {
 *     pool.release(staging);
 * }
 * }</pre>
 *
 * <p>Segments are page-aligned native memory ({@link NativeMemory#allocateAligned}), each shares no page with another
 * (the CUDA driver refuses to page-lock a page twice), and every one is tied to a scope the pool closes in
 * {@link #close()} before freeing: a lease used after the close throws {@link IllegalStateException} instead of
 * touching freed memory. A pool built with only {@code onNewSegment} (which registers segments for DMA) never frees a
 * segment before its close, because the registration would outlive the memory; give it {@code onRetireSegment} to let
 * it retire idle segments.
 *
 * <p>Thread-safe: one lock guards the bookkeeping, never an allocation or a callback. Acquire and release allocate
 * no Java objects once the pool has seen a size. Every live pool and lease is counted, so tests can fail on a leak.
 */
public final class SegmentPool implements AutoCloseable {
    /** The granularity and alignment of segments, in bytes. */
    public static final long PAGE_BYTES = 4096;
    /** The largest lease, in bytes (1 TiB). */
    public static final long MAX_LEASE_BYTES = 1L << 40;
    private static final AtomicLong LIVE_LEASES = new AtomicLong();
    private static final AtomicLong LIVE_POOLS = new AtomicLong();

    /** Idle segments of one size, most recently released first. */
    private static final class SizeClass {
        final long bytes;
        final ArrayDeque<MemorySegment> idle = new ArrayDeque<>();

        SizeClass(long bytes) {
            this.bytes = bytes;
        }
    }

    private final Arena scope = Arena.ofShared();
    private final long maxBytes;
    private final Consumer<MemorySegment> onNewSegment;
    private final Consumer<MemorySegment> onRetireSegment;
    private final Object lock = new Object();
    private SizeClass[] classes = new SizeClass[0];
    private final List<MemorySegment> all = new ArrayList<>();
    private long allocatedBytes;
    private long leases;
    private boolean closed;

    /** A pool that holds at most {@code maxBytes} bytes of segments and retires idle ones to make room. */
    public SegmentPool(long maxBytes) {
        this(maxBytes, s -> { }, s -> { });
    }

    /**
     * A pool that calls {@code onNewSegment} once for each segment it allocates, for example to register it with a
     * store for zero-copy transfers. It never frees a segment before {@link #close()}.
     */
    public SegmentPool(long maxBytes, Consumer<MemorySegment> onNewSegment) {
        this(maxBytes, onNewSegment, null);
    }

    /**
     * A pool that calls {@code onNewSegment} for each segment it allocates and {@code onRetireSegment} (for example
     * to deregister it) before it frees an idle segment to make room for another size; null never retires. Neither
     * is called by {@link #close()}: deregister {@link #segments()} before closing.
     */
    public SegmentPool(long maxBytes, Consumer<MemorySegment> onNewSegment, Consumer<MemorySegment> onRetireSegment) {
        if (maxBytes <= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "pool bound " + maxBytes + " bytes must be positive").build();
        }
        this.maxBytes = maxBytes;
        this.onNewSegment = onNewSegment;
        this.onRetireSegment = onRetireSegment;
        LIVE_POOLS.incrementAndGet();
    }

    /**
     * Leases a segment of at least {@link #leaseBytes(long) leaseBytes(bytes)} bytes, as {@link #tryAcquire} does.
     *
     * @throws KVException {@code STORE_FULL} when the bound leaves no room (see {@link #tryAcquire}); {@code CLOSED};
     *     {@code INVALID_ARGUMENT} for a size outside 0..{@link #MAX_LEASE_BYTES}
     */
    public MemorySegment acquire(long bytes) {
        MemorySegment s = tryAcquire(bytes);
        if (s == null) {
            throw KVException.of(ErrorCode.STORE_FULL, describeNoRoom(bytes)).operation("acquire")
                    .hint("raise the staging bound, or release segments: every acquire needs a release").build();
        }
        return s;
    }

    /**
     * {@link #tryAcquire(long)}, waiting up to {@code timeoutNanos} while the bound leaves no room, for other
     * holders to release theirs; it polls with a backoff from 10 us to 1 ms.
     *
     * @return the segment, or null when there was still no room at the deadline (nothing was leased)
     * @throws KVException as {@link #tryAcquire(long)}
     */
    public MemorySegment tryAcquire(long bytes, long timeoutNanos) {
        MemorySegment s = tryAcquire(bytes);
        long deadline = System.nanoTime() + timeoutNanos;
        long backoff = 10_000;
        while (s == null && System.nanoTime() - deadline < 0) {
            LockSupport.parkNanos(backoff);
            backoff = Math.min(2 * backoff, 1_000_000);
            s = tryAcquire(bytes);
        }
        return s;
    }

    /** Why a lease of {@code bytes} finds no room now: the request and the pool's state, for errors and misses. */
    public String describeNoRoom(long bytes) {
        return "staging pool exhausted: " + bytes + " bytes requested (lease " + leaseBytes(bytes) + "), "
                + allocatedBytes() + " of " + maxBytes + " bytes allocated, " + outstandingLeases() + " leases out";
    }

    /**
     * Leases a segment of at least {@link #leaseBytes(long) leaseBytes(bytes)} bytes: an idle one of that size, or a
     * new one of that size while the bound allows (after retiring idle segments of other sizes, where the pool may),
     * or else the smallest larger idle one.
     *
     * @return the segment, or null when the bound leaves no room now (nothing was leased)
     * @throws KVException {@code CLOSED}; {@code INVALID_ARGUMENT} for a size outside 0..{@link #MAX_LEASE_BYTES}
     */
    public MemorySegment tryAcquire(long bytes) {
        long size = leaseBytes(bytes);
        MemorySegment[] retired = null;
        synchronized (lock) {
            checkOpen();
            SizeClass c = classOf(size);
            if (c != null && !c.idle.isEmpty()) {
                leased();
                return c.idle.pollFirst();
            }
            if (allocatedBytes + size > maxBytes) {
                retired = retireFor(size);
            }
            if (allocatedBytes + size > maxBytes) {
                SizeClass larger = smallestIdleAbove(size);
                if (larger != null) {
                    leased();
                    freeRetired(retired);
                    return larger.idle.pollFirst();
                }
                freeRetired(retired);
                return null;
            }
            allocatedBytes += size;
        }
        freeRetired(retired);
        return allocate(size);
    }

    private MemorySegment allocate(long size) {
        MemorySegment s;
        try {
            s = NativeMemory.allocateAligned(size, PAGE_BYTES);
        } catch (RuntimeException e) {
            synchronized (lock) {
                allocatedBytes -= size;
            }
            throw e;
        }
        synchronized (lock) {
            if (closed) {
                allocatedBytes -= size;
                NativeMemory.free(s);
                throw closedError();
            }
            s = reinterpretIntoScope(s);
            all.add(s);
            if (classOf(size) == null) {
                SizeClass[] grown = Arrays.copyOf(classes, classes.length + 1);
                grown[classes.length] = new SizeClass(size);
                classes = grown;
            }
            leased();
        }
        onNewSegment.accept(s);
        return s;
    }

    @SuppressWarnings("restricted")
    private MemorySegment reinterpretIntoScope(MemorySegment s) {
        return s.reinterpret(scope, null);
    }

    /**
     * Takes idle segments of other sizes out of the pool, least recently released first, until {@code size} more
     * bytes fit or none is left; null when the pool may not retire. Caller holds the lock and frees them after.
     */
    private MemorySegment[] retireFor(long size) {
        if (onRetireSegment == null) {
            return null;
        }
        List<MemorySegment> out = new ArrayList<>();
        for (SizeClass c : classes) {
            while (!c.idle.isEmpty() && allocatedBytes + size > maxBytes) {
                MemorySegment s = c.idle.pollLast();
                all.remove(s);
                allocatedBytes -= s.byteSize();
                out.add(s);
            }
        }
        return out.toArray(new MemorySegment[0]);
    }

    private void freeRetired(MemorySegment[] retired) {
        if (retired == null) {
            return;
        }
        for (MemorySegment s : retired) {
            onRetireSegment.accept(s);
            NativeMemory.free(s);
        }
    }

    /** The class of the smallest idle segment larger than {@code size}, or null. Caller holds the lock. */
    private SizeClass smallestIdleAbove(long size) {
        SizeClass best = null;
        for (SizeClass c : classes) {
            if (c.bytes > size && !c.idle.isEmpty() && (best == null || c.bytes < best.bytes)) {
                best = c;
            }
        }
        return best;
    }

    private SizeClass classOf(long size) {
        for (SizeClass c : classes) {
            if (c.bytes == size) {
                return c;
            }
        }
        return null;
    }

    private void leased() {
        leases++;
        LIVE_LEASES.incrementAndGet();
    }

    /**
     * Returns a segment obtained from {@link #acquire} or {@link #tryAcquire}. After {@link #close()} this only
     * counts the lease back.
     *
     * @throws KVException {@code INVALID_ARGUMENT} for a segment of a size this pool never leased (a slice)
     */
    public void release(MemorySegment segment) {
        synchronized (lock) {
            if (closed) {
                return;
            }
            SizeClass c = classOf(segment.byteSize());
            if (c == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "segment of " + segment.byteSize()
                        + " bytes did not come from this pool; release the segment acquire() returned, not a slice")
                        .build();
            }
            leases--;
            LIVE_LEASES.decrementAndGet();
            c.idle.offerFirst(segment);
        }
    }

    /** The bytes of a lease for a request of {@code bytes} bytes: whole pages, at least one. */
    public static long leaseBytes(long bytes) {
        if (bytes < 0 || bytes > MAX_LEASE_BYTES) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot stage " + bytes + " bytes (0.."
                    + MAX_LEASE_BYTES + ")").build();
        }
        return Math.max(PAGE_BYTES, (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES);
    }

    /** Every segment this pool holds (leased or idle), for registration with a store. */
    public List<MemorySegment> segments() {
        synchronized (lock) {
            return List.copyOf(all);
        }
    }

    /** Bytes of segments this pool holds, leased or idle. */
    public long allocatedBytes() {
        synchronized (lock) {
            return allocatedBytes;
        }
    }

    /** Leases not yet released. */
    public long outstandingLeases() {
        synchronized (lock) {
            return leases;
        }
    }

    private void checkOpen() {
        if (closed) {
            throw closedError();
        }
    }

    private static KVException closedError() {
        return KVException.of(ErrorCode.CLOSED, "the staging pool is closed").operation("acquire").build();
    }

    /**
     * Frees every segment, after closing their scope. Leases still out become invalid (access throws
     * {@link IllegalStateException}); closing with leases out is a bug in the caller and is reported as
     * {@code INTERNAL} after the memory is freed.
     */
    @Override
    public void close() {
        MemorySegment[] segments;
        long out;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            segments = all.toArray(new MemorySegment[0]);
            all.clear();
            for (SizeClass c : classes) {
                c.idle.clear();
            }
            out = leases;
            leases = 0;
            allocatedBytes = 0;
        }
        scope.close();
        for (MemorySegment s : segments) {
            NativeMemory.free(s);
        }
        LIVE_POOLS.decrementAndGet();
        if (out != 0) {
            LIVE_LEASES.addAndGet(-out);
            throw KVException.of(ErrorCode.INTERNAL, "staging pool closed with " + out + " segments still leased")
                    .hint("every acquire() needs a release() in a finally block").build();
        }
    }

    /** Leases not yet released, across every pool of the process. */
    public static long liveLeases() {
        return LIVE_LEASES.get();
    }

    /** Pools not yet closed, across the process. */
    public static long livePools() {
        return LIVE_POOLS.get();
    }
}
