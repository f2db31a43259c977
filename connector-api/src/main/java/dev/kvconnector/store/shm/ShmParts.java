package dev.kvconnector.store.shm;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * The parts of a store over one mapping, wired to each other: the lock, the process table and leases, the entry
 * table, the blocks, the index, the event ring, and an entry's space with its eviction and recovery. {@link ShmStore} builds one per
 * open instance; the parts' tests build one over a plain segment, so they run the parts as the store wires them.
 */
final class ShmParts {
    final ShmLock lock;
    final LeaseTable leases;
    final EntryTable entries;
    final BlockAllocator blocks;
    final ShmIndex index;
    final EventRing events;
    final ShmSpace space;

    /**
     * @param path the store file, for messages
     * @param uri the store's URI, masked, for messages
     * @param lockTimeoutMillis how long the lock waits for a live holder, in ms
     * @param evictLive false for {@code eviction=refuse}
     */
    ShmParts(MemorySegment map, ShmLayout lay, Path path, String uri, long lockTimeoutMillis, boolean evictLive) {
        lock = new ShmLock(map, path, uri, lockTimeoutMillis, this::repair);
        leases = new LeaseTable(map, lay);
        entries = new EntryTable(map, lay);
        blocks = new BlockAllocator(map, lay);
        index = new ShmIndex(map, lay, entries, leases, lock, path, uri);
        events = new EventRing(map, lay, entries);
        space = new ShmSpace(map, lay, entries, blocks, leases, index, events, path, evictLive);
    }

    /**
     * Run by the lock when it takes over from a dead holder (never before the constructor has returned). The holder
     * may have changed an entry without telling the event ring, so the ring's readers are shown a gap.
     */
    private void repair() {
        space.recovery().rebuild();
        events.skip();
    }
}
