package dev.kvconnector.store.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * The parts of a store ({@link ShmParts}, wired as {@link ShmStore} wires them) over a zeroed native segment of a
 * file's size instead of a mapped file, for the parts' own tests. Close it after the test.
 */
final class ShmPartsBench implements AutoCloseable {
    /** A token whose pid no process can have (above Linux's largest pid_max): always found dead. */
    static final long DEAD = 0x3FFF_FFF0L;

    final Arena arena = Arena.ofConfined();
    final ShmLayout lay;
    final MemorySegment map;
    final EntryTable entries;
    final BlockAllocator blocks;
    final LeaseTable leases;
    final ShmLock lock;
    final ShmIndex index;
    final ShmSpace space;
    final int procSlot;

    /** Parts over {@code capacity} bytes in blocks of {@code blockSize} bytes, {@code entryCount} entries. */
    ShmPartsBench(long capacity, long blockSize, long entryCount, boolean evictLive) {
        lay = ShmLayout.of(capacity, blockSize, entryCount);
        map = arena.allocate(lay.fileSize(), 4096);
        ShmParts parts = new ShmParts(map, lay, Path.of("/parts-bench"), "shm:/parts-bench", 200, evictLive);
        entries = parts.entries;
        blocks = parts.blocks;
        blocks.reset();
        leases = parts.leases;
        lock = parts.lock;
        index = parts.index;
        space = parts.space;
        procSlot = leases.claimSlot();
    }

    /** Allocates and commits {@code key} with {@code len} bytes under the lock, as a put would; returns the entry. */
    int commit(String key, long len, long expiresMillis) {
        KeyScratch k = KeyScratch.encode(key);
        lock.lock();
        try {
            int e = space.allocate(k, (len + lay.blockSize() - 1) / lay.blockSize(), len, System.currentTimeMillis());
            if (e < 0) {
                return e;
            }
            long slot = index.find(k);
            int old = slot >= 0 ? index.entryAt(slot) : -1;
            if (old < 0) {
                index.makeRoom();
            }
            entries.commit(e, expiresMillis, entries.nextCommitSeq());
            if (old >= 0) {
                index.replace(slot, k, e);
                space.retire(old);
            } else {
                index.add(k, e);
            }
            return e;
        } finally {
            lock.unlock();
        }
    }

    /** The entry indexed under {@code key}, or -1; under the lock. */
    int find(String key) {
        long slot = index.find(KeyScratch.encode(key));
        return slot < 0 ? -1 : index.entryAt(slot);
    }

    long freeBlocks() {
        return lay.blockCount() - blocks.usedBlocks();
    }

    @Override
    public void close() {
        arena.close();
    }
}
