package dev.kvconnector.lmcache.server;

import dev.kvconnector.lmcache.protocol.LmObjectMeta;
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
 * <p>A PUT first {@link #reserve reserves} its size (evicting as needed), then receives the payload into memory it
 * allocated outside the lock, then {@link #commit commits}; so the stored plus in-flight bytes never exceed the
 * capacity. Readers {@link #acquire} a value, which keeps its memory alive while it is sent even if the entry is
 * evicted or replaced meanwhile; the last {@link #release} frees it.
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
    private final NativeHeap heap;
    private final long capacityBytes;
    private long storedBytes;
    private long reservedBytes;
    private long evictions;

    OffHeapLruCache(NativeHeap heap, long capacityBytes) {
        this.heap = heap;
        this.capacityBytes = capacityBytes;
    }

    /**
     * Reserves {@code bytes} for a value on its way in, evicting least recently used entries as needed.
     *
     * @return false, evicting nothing, when the value cannot fit even in an empty cache beside the other in-flight
     *         values
     */
    boolean reserve(long bytes) {
        List<Value> evicted = new ArrayList<>();
        boolean ok;
        lock.lock();
        try {
            if (bytes > capacityBytes - reservedBytes) {
                // Could not fit even with every stored entry gone: evicting would lose entries for nothing.
                return false;
            }
            Iterator<Map.Entry<String, Value>> lru = entries.entrySet().iterator();
            while (storedBytes + reservedBytes + bytes > capacityBytes && lru.hasNext()) {
                Value v = lru.next().getValue();
                lru.remove();
                storedBytes -= v.data.byteSize();
                evictions++;
                if (--v.refs == 0) {
                    evicted.add(v);
                }
            }
            ok = storedBytes + reservedBytes + bytes <= capacityBytes;
            if (ok) {
                reservedBytes += bytes;
            }
        } finally {
            lock.unlock();
        }
        freeAll(evicted);
        return ok;
    }

    /** Gives back a reservation whose payload never arrived. */
    void cancel(long bytes) {
        lock.lock();
        try {
            reservedBytes -= bytes;
        } finally {
            lock.unlock();
        }
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
            free(old);
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
            free(v);
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

    /** Drops every entry; values still held by readers are freed by their last release. */
    void clear() {
        List<Value> dropped = new ArrayList<>();
        lock.lock();
        try {
            for (Value v : entries.values()) {
                if (--v.refs == 0) {
                    dropped.add(v);
                }
            }
            entries.clear();
            storedBytes = 0;
        } finally {
            lock.unlock();
        }
        freeAll(dropped);
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

    private void freeAll(List<Value> values) {
        for (Value v : values) {
            free(v);
        }
    }

    private void free(Value v) {
        if (v.data.byteSize() > 0) {
            heap.free(v.data);
        }
    }
}
