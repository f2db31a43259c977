package dev.kvconnector.store.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The parts of a store wired as {@link ShmStore} wires them, over a zeroed segment of the heap's size instead of a
 * mapped file, for the parts' own tests. Close it after the test.
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
    /** Times the lock ran its repair. */
    final AtomicInteger repairs = new AtomicInteger();
    final int procSlot;

    /** Parts over {@code capacity} bytes in blocks of {@code blockSize} bytes, {@code entryCount} entries. */
    ShmPartsBench(long capacity, long blockSize, long entryCount, boolean evictLive) {
        lay = ShmLayout.of(capacity, blockSize, entryCount);
        map = arena.allocate(lay.fileSize(), 4096);
        Path path = Path.of("/parts-bench");
        entries = new EntryTable(map, lay);
        blocks = new BlockAllocator(map, lay);
        blocks.reset();
        leases = new LeaseTable(map, lay);
        lock = new ShmLock(map, path, "shm:/parts-bench", 200, () -> {
            repairs.incrementAndGet();
            space().recovery().rebuild();
        });
        index = new ShmIndex(map, lay, entries, leases, lock, path, "shm:/parts-bench");
        space = new ShmSpace(map, lay, entries, blocks, leases, index, path, evictLive);
        procSlot = leases.claimSlot();
    }

    private ShmSpace space() {
        return space;
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
