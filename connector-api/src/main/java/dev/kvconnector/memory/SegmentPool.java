package dev.kvconnector.memory;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * A pool of off-heap staging segments in power-of-two size classes, so that no transfer opens an arena.
 *
 * <p>Segments come from one shared arena owned by the pool and are reused until the pool closes. A lease is a
 * whole size-class segment ({@code byteSize() >= requested}); slice it to the size you need, and give the
 * segment itself back with {@link #release}. The pool never holds more than {@code maxBytes}; an acquire that
 * would pass the bound fails with {@code STORE_FULL} rather than wait, because a caller holding leases while
 * waiting could deadlock the pool.
 *
 * <pre>{@code
 * MemorySegment staging = pool.acquire(bytes);
 * try {
 *     fill(staging.asSlice(0, bytes));
 * } finally {
 *     pool.release(staging);
 * }
 * }</pre>
 *
 * <p>Thread-safe. Every live pool and lease is counted, so tests can fail on a leak.
 */
public final class SegmentPool implements AutoCloseable {
    private static final int MIN_SHIFT = 12;
    private static final int MAX_SHIFT = 40;
    private static final long PAGE_BYTES = 1L << MIN_SHIFT;
    private static final AtomicLong LIVE_LEASES = new AtomicLong();
    private static final AtomicLong LIVE_POOLS = new AtomicLong();

    private final Arena arena = Arena.ofShared();
    @SuppressWarnings("unchecked")
    private final ConcurrentLinkedDeque<MemorySegment>[] free = new ConcurrentLinkedDeque[MAX_SHIFT + 1];
    private final long maxBytes;
    private final AtomicLong allocatedBytes = new AtomicLong();
    private final AtomicLong leases = new AtomicLong();
    private final List<MemorySegment> all = new ArrayList<>();
    private final Consumer<MemorySegment> onNewSegment;
    private volatile boolean closed;

    /** A pool that holds at most {@code maxBytes} of segments. */
    public SegmentPool(long maxBytes) {
        this(maxBytes, s -> { });
    }

    /**
     * A pool that calls {@code onNewSegment} once for each segment it allocates, for example to register it with a
     * store for zero-copy transfers.
     */
    public SegmentPool(long maxBytes, Consumer<MemorySegment> onNewSegment) {
        if (maxBytes <= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "pool bound " + maxBytes + " bytes must be positive").build();
        }
        for (int i = 0; i < free.length; i++) {
            free[i] = new ConcurrentLinkedDeque<>();
        }
        this.maxBytes = maxBytes;
        this.onNewSegment = onNewSegment;
        LIVE_POOLS.incrementAndGet();
    }

    /**
     * Leases a segment of at least {@code bytes} bytes. Segments are whole, page-aligned pages (4096 bytes), so one
     * registered for DMA (page-locked with {@code cuMemHostRegister}, or an RDMA memory region) shares no page with
     * another segment: the CUDA driver refuses to page-lock a page twice.
     */
    public MemorySegment acquire(long bytes) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the staging pool is closed").operation("acquire").build();
        }
        int shift = classOf(bytes);
        MemorySegment s = free[shift].pollFirst();
        if (s == null) {
            s = allocate(shift, bytes);
        }
        leases.incrementAndGet();
        LIVE_LEASES.incrementAndGet();
        return s;
    }

    private MemorySegment allocate(int shift, long requested) {
        long size = 1L << shift;
        long now = allocatedBytes.addAndGet(size);
        if (now > maxBytes) {
            allocatedBytes.addAndGet(-size);
            throw KVException.of(ErrorCode.STORE_FULL, "staging pool exhausted: " + requested + " bytes requested (class "
                    + size + "), " + (now - size) + " of " + maxBytes + " bytes in use")
                    .operation("acquire")
                    .hint("raise the staging bound, or release segments: every acquire needs a release").build();
        }
        MemorySegment s;
        synchronized (all) {
            if (closed) {
                allocatedBytes.addAndGet(-size);
                throw KVException.of(ErrorCode.CLOSED, "the staging pool is closed").operation("acquire").build();
            }
            s = arena.allocate(size, PAGE_BYTES);
            all.add(s);
        }
        onNewSegment.accept(s);
        return s;
    }

    /** Returns a segment obtained from {@link #acquire}. */
    public void release(MemorySegment segment) {
        int shift = Long.numberOfTrailingZeros(segment.byteSize());
        if (Long.bitCount(segment.byteSize()) != 1 || shift < MIN_SHIFT || shift > MAX_SHIFT) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "segment of " + segment.byteSize()
                    + " bytes did not come from this pool; release the segment acquire() returned, not a slice").build();
        }
        leases.decrementAndGet();
        LIVE_LEASES.decrementAndGet();
        if (!closed) {
            free[shift].offerFirst(segment);
        }
    }

    /** Every segment this pool allocated, for registration with a store. */
    public List<MemorySegment> segments() {
        synchronized (all) {
            return List.copyOf(all);
        }
    }

    /** Bytes allocated by this pool. */
    public long allocatedBytes() {
        return allocatedBytes.get();
    }

    /** Leases not yet released. */
    public long outstandingLeases() {
        return leases.get();
    }

    private static int classOf(long bytes) {
        if (bytes < 0 || bytes > (1L << MAX_SHIFT)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot stage " + bytes + " bytes").build();
        }
        return Math.max(MIN_SHIFT, 64 - Long.numberOfLeadingZeros(Math.max(1, bytes) - 1));
    }

    /**
     * Frees every segment. Leases still out become invalid; closing with leases out is a bug in the caller and
     * is reported as {@code INTERNAL} after the memory is freed.
     */
    @Override
    public void close() {
        synchronized (all) {
            if (closed) {
                return;
            }
            closed = true;
        }
        long out = leases.get();
        arena.close();
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
