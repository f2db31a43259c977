package dev.kvconnector.lmcache.server;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.memory.NativeMemory;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One server's share of {@link NativeMemory} (the C library's malloc), counted so that a server can report, and
 * tests can check, what it still holds.
 *
 * <p>Why malloc rather than arenas or slabs: values range from kilobytes to gigabytes and live until evicted in
 * any order. An arena per value is the cost the project forbids (a shared arena's close is a global handshake),
 * and a slab allocator would need its own fragmentation handling for such sizes. glibc's malloc is thread-safe,
 * reuses freed blocks, and serves large blocks with {@code mmap}, so a large block the server lets go of goes
 * straight back to the operating system. The price is a page fault per 4 KiB page of every fresh large block, which
 * is why {@link OffHeapLruCache} keeps freed blocks of 64 KiB and more for the next value of the same size.
 */
final class NativeHeap {
    private final AtomicLong bytesInUse = new AtomicLong();

    /** Allocates {@code bytes} (> 0) of unzeroed native memory, or returns null when malloc fails. */
    MemorySegment allocate(long bytes) {
        MemorySegment segment;
        try {
            segment = NativeMemory.allocate(bytes);
        } catch (KVException e) {
            if (e.code() == ErrorCode.STORE_FULL) {
                return null;
            }
            throw e;
        }
        bytesInUse.addAndGet(bytes);
        return segment;
    }

    /** Frees a segment returned by {@link #allocate}. */
    void free(MemorySegment segment) {
        NativeMemory.free(segment);
        bytesInUse.addAndGet(-segment.byteSize());
    }

    /** Bytes allocated and not yet freed. */
    long bytesInUse() {
        return bytesInUse.get();
    }
}
