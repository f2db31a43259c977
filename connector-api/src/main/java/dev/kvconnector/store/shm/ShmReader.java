package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The store's reads, which take no lock: a read leases the entry it finds in this instance's lease records, copies
 * (or, for a view, keeps the lease until the release), and the last reader out of an entry removed meanwhile frees
 * it. Allocates nothing: a view's slice comes from a {@link SliceCache}.
 *
 * <p>Reads of a value that a truncation of the file (by another process) cut off fail with {@code CORRUPT_OBJECT}
 * naming the file; values before the cut stay readable.
 */
final class ShmReader {
    private final ShmFile file;
    private final MemorySegment map;
    private final ShmLayout lay;
    private final EntryTable entries;
    private final ShmIndex index;
    private final LeaseTable leases;
    private final ShmLock lock;
    private final ShmSpace space;
    private final EventRing events;
    private final int procSlot;
    private final String uri;
    private final AtomicInteger viewsHeld = new AtomicInteger();
    private final SliceCache viewSlices;

    ShmReader(ShmFile file, ShmParts parts, int procSlot, String uri) {
        this.file = file;
        this.map = file.map();
        this.lay = file.layout();
        this.entries = parts.entries;
        this.index = parts.index;
        this.leases = parts.leases;
        this.lock = parts.lock;
        this.space = parts.space;
        this.events = parts.events;
        this.procSlot = procSlot;
        this.uri = uri;
        this.viewSlices = new SliceCache(file.readOnly(), lay.entryCount());
    }

    /**
     * Finds the committed, unexpired entry for the key and leases it; the caller releases the lease with
     * {@link #release}. Returns the entry, or {@link ShmIndex#MISS} (no lease held then). An expired entry found
     * on the way is reclaimed if the lock is free.
     */
    int lookup(KeyScratch k) {
        int e;
        try {
            e = index.probe(k, procSlot);
        } catch (RuntimeException ex) {
            release(k);
            throw ex;
        }
        if (e >= 0 && entries.expired(e, System.currentTimeMillis())) {
            release(k);
            reclaimExpired(e, k.stateWord);
            return ShmIndex.MISS;
        }
        return e;
    }

    /** Whether the key is there, unexpired; holds no lease afterwards. */
    boolean contains(KeyScratch k) {
        if (lookup(k) < 0) {
            return false;
        }
        release(k);
        return true;
    }

    /**
     * Copies the key's value into {@code dst}: its length, or a {@link GetResult} code.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter})
     */
    long getInto(KeyScratch k, MemorySegment dst, long fileSize) {
        if (dst == null || dst.isReadOnly()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the destination is " + (dst == null ? "null"
                    : "read-only")).store(uri).operation("get").key(k.text()).build();
        }
        int e = lookup(k);
        if (e < 0) {
            return GetResult.MISS;
        }
        try {
            long len = entries.valueLength(e);
            long src = payload(e, "get", k);
            file.size().requireCovers(fileSize, src + len, "get", k);
            if (len > dst.byteSize()) {
                return GetResult.tooSmall(len);
            }
            if (ShmTestHooks.GET_PAUSE_MS > 0) {
                long half = len / 2;
                MemorySegment.copy(map, src, dst, 0, half);
                ShmTestHooks.pause(ShmTestHooks.GET_PAUSE_MS);
                MemorySegment.copy(map, src + half, dst, half, len - half);
            } else {
                MemorySegment.copy(map, src, dst, 0, len);
            }
            file.size().recheck(src + len, len, "get", k);
            entries.markReferenced(e);
            return len;
        } catch (InternalError fault) {
            throw file.size().named(fault, "get", k);
        } finally {
            release(k);
        }
    }

    /**
     * The key's value length in bytes, or -1.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter}): a value that a truncation
     *     cut off is not reported as there, but as CORRUPT_OBJECT
     */
    long size(KeyScratch k, long fileSize) {
        int e = lookup(k);
        if (e < 0) {
            return -1;
        }
        try {
            long len = entries.valueLength(e);
            file.size().requireCovers(fileSize, payload(e, "size", k) + len, "size", k);
            return len;
        } finally {
            release(k);
        }
    }

    /**
     * Looks the key up as a get does and, on a hit, hands the read's lease record to {@code v} instead of clearing
     * it, with a read-only slice of the mapping over the value. Returns the value's length, or {@link GetResult#MISS}.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter})
     * @throws KVException BUSY when this instance already holds {@value ShmStore#MAX_VIEWS} views; CORRUPT_OBJECT
     *     when a truncation of the file cut the value off
     */
    long view(KeyScratch k, ShmView v, long fileSize) {
        if (viewsHeld.incrementAndGet() > ShmStore.MAX_VIEWS) {
            viewsHeld.decrementAndGet();
            throw KVException.of(ErrorCode.BUSY, "this store instance holds " + ShmStore.MAX_VIEWS + " views already")
                    .store(uri).operation("tryView").key(k.text())
                    .hint("release views before taking more; each held view keeps one of the "
                            + ShmLayout.LEASES_PER_PROC + " lease records of this instance").build();
        }
        boolean held = false;
        try {
            long r = viewHeld(k, v, fileSize);
            held = r >= 0;
            return r;
        } finally {
            if (!held) {
                viewsHeld.decrementAndGet();
            }
        }
    }

    /** Clears a view's lease record, as {@link #releaseAt} does, and counts the view released. */
    void releaseView(long leaseOffset) {
        viewsHeld.decrementAndGet();
        releaseAt(leaseOffset);
    }

    private long viewHeld(KeyScratch k, ShmView v, long fileSize) {
        int e = lookup(k);
        if (e < 0) {
            return GetResult.MISS;
        }
        long len;
        long src;
        try {
            len = entries.valueLength(e);
            src = payload(e, "tryView", k);
            file.size().requireCovers(fileSize, src + len, "tryView", k);
            entries.markReferenced(e);
        } catch (RuntimeException ex) {
            release(k);
            throw ex;
        }
        v.hold(k, k.leaseOffset, viewSlices.slice(src, len), src + len);
        k.leaseOffset = -1;
        return len;
    }

    /** Releases the lease {@code k} holds, if any. */
    void release(KeyScratch k) {
        if (k.leaseOffset < 0) {
            return;
        }
        long off = k.leaseOffset;
        k.leaseOffset = -1;
        releaseAt(off);
    }

    /** Clears the lease record at {@code off}; frees the entry it named when that was retired and is now unleased. */
    void releaseAt(long off) {
        int e = leases.clear(off);
        if (e >= 0 && entries.isRetiredVolatile(e) && lock.tryLock()) {
            try {
                space.freeIfUnleased(e);
            } finally {
                lock.unlock();
            }
        }
    }

    /** The entry's payload offset in the file, after checking the entry's numbers against the payload area. */
    long payload(int e, String op, KeyScratch key) {
        long off = entries.payloadOffset(e);
        long blocks = entries.blocks(e);
        long len = entries.valueLength(e);
        if (!entries.payloadInBounds(off, blocks, len)) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "entry " + e + " of " + file.path()
                    + " claims payload offset=" + off + " blocks=" + blocks + " length=" + len
                    + " outside the payload area of " + lay.capacity() + " bytes in blocks of " + lay.blockSize())
                    .store(uri).operation(op).key(key.text()).hint("the file " + file.path()
                            + " was changed by something else; delete it if no process uses it").build();
        }
        return lay.payloadOffset() + off;
    }

    private void reclaimExpired(int e, long stateWord) {
        if (!lock.tryLock()) {
            return;
        }
        try {
            if (entries.stateWord(e) == stateWord) {
                index.remove(e);
                events.transmit(ShmLayout.EVENT_EXPIRED, e);
                space.retire(e);
            }
        } finally {
            lock.unlock();
        }
    }
}
