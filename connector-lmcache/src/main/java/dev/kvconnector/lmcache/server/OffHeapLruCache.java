package dev.kvconnector.lmcache.server;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.memory.KeptBlocks;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The server's store: keys to off-heap values, bounded to a capacity in bytes, evicting the least recently read
 * or written entry first.
 *
 * <p>A PUT first {@link #reserve reserves} its size (evicting as needed) and gets the memory to receive into, then
 * receives the payload outside the lock, then {@link #commit commits}. Readers {@link #acquire} a value, which keeps
 * its memory alive while it is sent even if the entry is evicted or replaced meanwhile; the last {@link #release}
 * lets it go.
 *
 * <p>Memory that a value lets go of, when it is {@value KeptBlocks#MIN_BYTES} bytes or more, is kept for the next PUT
 * of exactly that size ({@link KeptBlocks}) while the capacity allows, instead of going back to malloc. glibc serves such blocks with
 * {@code mmap} (or trims them off its heap when freed), so every PUT into fresh memory paid one page fault per
 * 4 KiB page while receiving: measured on the project's VM, a 32 MiB PUT took 8,200 minor faults and 150-900 ms,
 * where the GET of the same object took 15-60 ms, and malloc tuning ({@code MALLOC_MMAP_THRESHOLD_},
 * {@code MALLOC_TRIM_THRESHOLD_}) removed the faults only for some PUTs. Replacing a key, and storing a stream of
 * same-sized chunks or layers, now reuses pages already mapped. Stored, in-flight and kept bytes together never
 * exceed the capacity: a PUT that needs room drops kept blocks before it evicts an entry.
 */
final class OffHeapLruCache {
    /** A stored value; {@code refs} counts the map's reference plus readers, guarded by the cache's lock. */
    static final class Value {
        final MemorySegment data;
        final LmObjectMeta meta;
        private int refs = 1;

        Value(MemorySegment data, LmObjectMeta meta) {
            this.data = data;
            this.meta = meta;
        }
    }

    private final ReentrantLock lock = new ReentrantLock();
    private final LinkedHashMap<String, Value> entries = new LinkedHashMap<>(1024, 0.75f, true);
    private final KeptBlocks<MemorySegment> kept = new KeptBlocks<>(MemorySegment::byteSize);
    private final NativeHeap heap;
    private final long capacityBytes;
    private long storedBytes;
    private long reservedBytes;
    private long evictions;
    private boolean cleared;

    OffHeapLruCache(NativeHeap heap, long capacityBytes) {
        this.heap = heap;
        this.capacityBytes = capacityBytes;
    }

    /**
     * Reserves {@code bytes} for a value on its way in, dropping kept blocks and then evicting least recently used
     * entries as needed, and returns the memory to receive it into: a kept block of exactly that size, the block of
     * an entry just evicted for it, or else fresh memory from malloc. Give it back with {@link #commit} or
     * {@link #cancel}.
     *
     * @return null, evicting nothing, when the value cannot fit even in an empty cache beside the other in-flight
     *         values; {@link MemorySegment#NULL} for 0 bytes
     * @throws KVException {@code STORE_FULL} when malloc fails; the reservation is then given back
     */
    MemorySegment reserve(long bytes) {
        List<MemorySegment> dropped = new ArrayList<>();
        MemorySegment block;
        lock.lock();
        try {
            if (bytes > capacityBytes - reservedBytes) {
                // Could not fit even with every stored entry gone: evicting would lose entries for nothing.
                return null;
            }
            block = kept.take(bytes);
            Iterator<Map.Entry<String, Value>> lru = entries.entrySet().iterator();
            while (storedBytes + reservedBytes + kept.bytes() + bytes > capacityBytes) {
                if (kept.bytes() > 0) {
                    dropped.add(kept.dropOne());
                    continue;
                }
                // Reached only with entries left: with none, the check above makes the value fit.
                Value v = lru.next().getValue();
                lru.remove();
                storedBytes -= v.data.byteSize();
                evictions++;
                if (--v.refs == 0 && v.data.byteSize() > 0) {
                    if (block == null && v.data.byteSize() == bytes) {
                        block = v.data;
                    } else {
                        dropped.add(v.data);
                    }
                }
            }
            reservedBytes += bytes;
        } finally {
            lock.unlock();
        }
        for (MemorySegment m : dropped) {
            heap.free(m);
        }
        if (bytes == 0) {
            return MemorySegment.NULL;
        }
        if (block == null) {
            block = heap.allocate(bytes);
            if (block == null) {
                unreserve(bytes);
                throw KVException.of(ErrorCode.STORE_FULL, "malloc(" + bytes + ") failed").build();
            }
        }
        return block;
    }

    /** Bytes reserved by PUTs whose payload is still arriving. */
    long reservedBytes() {
        lock.lock();
        try {
            return reservedBytes;
        } finally {
            lock.unlock();
        }
    }

    /** Gives back a reservation whose payload never arrived, and the memory {@link #reserve} returned for it. */
    void cancel(MemorySegment data) {
        unreserve(data.byteSize());
        letGo(data);
    }

    /** Turns a reservation into a stored value, replacing (and releasing) any value under the same key. */
    void commit(String key, MemorySegment data, LmObjectMeta meta) {
        Value old;
        lock.lock();
        try {
            reservedBytes -= data.byteSize();
            storedBytes += data.byteSize();
            old = entries.put(key, new Value(data, meta));
            if (old != null) {
                storedBytes -= old.data.byteSize();
                if (--old.refs != 0) {
                    old = null;
                }
            }
        } finally {
            lock.unlock();
        }
        if (old != null) {
            letGo(old.data);
        }
    }

    /** The value under {@code key}, marked most recently used and held until {@link #release}; null on a miss. */
    Value acquire(String key) {
        lock.lock();
        try {
            Value v = entries.get(key);
            if (v != null) {
                v.refs++;
            }
            return v;
        } finally {
            lock.unlock();
        }
    }

    /** Ends a reader's hold on {@code v}; frees it when it was evicted or replaced and this was the last hold. */
    void release(Value v) {
        boolean last;
        lock.lock();
        try {
            last = --v.refs == 0;
        } finally {
            lock.unlock();
        }
        if (last) {
            letGo(v.data);
        }
    }

    /** Whether {@code key} is stored; does not count as a use. */
    boolean contains(String key) {
        lock.lock();
        try {
            return entries.containsKey(key);
        } finally {
            lock.unlock();
        }
    }

    /** The stored keys, least recently used first. */
    List<String> keys() {
        lock.lock();
        try {
            return new ArrayList<>(entries.keySet());
        } finally {
            lock.unlock();
        }
    }

    /**
     * Drops every entry and kept block; values still held by readers are freed by their last release, which no
     * longer keeps anything.
     */
    void clear() {
        List<MemorySegment> dropped = new ArrayList<>();
        lock.lock();
        try {
            cleared = true;
            for (Value v : entries.values()) {
                if (--v.refs == 0 && v.data.byteSize() > 0) {
                    dropped.add(v.data);
                }
            }
            entries.clear();
            storedBytes = 0;
            kept.drainTo(dropped);
        } finally {
            lock.unlock();
        }
        for (MemorySegment m : dropped) {
            heap.free(m);
        }
    }

    /** Bytes of stored values. */
    long storedBytes() {
        lock.lock();
        try {
            return storedBytes;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes of freed values' memory kept for the next PUT of the same size. */
    long keptBytes() {
        lock.lock();
        try {
            return kept.bytes();
        } finally {
            lock.unlock();
        }
    }

    /** Number of stored entries. */
    int size() {
        lock.lock();
        try {
            return entries.size();
        } finally {
            lock.unlock();
        }
    }

    /** Entries evicted to make room, since start. */
    long evictions() {
        lock.lock();
        try {
            return evictions;
        } finally {
            lock.unlock();
        }
    }

    private void unreserve(long bytes) {
        lock.lock();
        try {
            reservedBytes -= bytes;
        } finally {
            lock.unlock();
        }
    }

    /** Keeps a value's memory no longer used for the next PUT of its size while the capacity allows, else frees it. */
    private void letGo(MemorySegment data) {
        long size = data.byteSize();
        if (size == 0) {
            return;
        }
        boolean keep;
        lock.lock();
        try {
            keep = !cleared && size >= KeptBlocks.MIN_BYTES
                    && storedBytes + reservedBytes + kept.bytes() + size <= capacityBytes;
            if (keep) {
                kept.keep(data);
            }
        } finally {
            lock.unlock();
        }
        if (!keep) {
            heap.free(data);
        }
    }
}
