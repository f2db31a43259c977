package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.RETIRED;
import static dev.kvconnector.store.shm.ShmLayout.FREE;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An entry's life in the file, from the space it takes to the space it gives back: {@link #allocate} takes a free
 * record and a run of blocks (evicting, then reaping dead processes' leftovers, when there is no room),
 * {@link #retire} takes an unindexed entry out of use and {@link #free} returns its record and blocks. All run under
 * the store lock.
 */
final class ShmSpace {
    private static final Logger LOG = LoggerFactory.getLogger(ShmSpace.class);
    /** {@link #allocate}'s answer when every entry record is in use. */
    static final int NO_ENTRY = -1;
    /** {@link #allocate}'s answer when no run of free blocks is long enough. */
    static final int NO_RUN = -2;

    private final ShmLayout lay;
    private final EntryTable entries;
    private final BlockAllocator blocks;
    private final LeaseTable leases;
    private final Path path;
    private final ClockEviction eviction;
    private final Recovery recovery;

    /**
     * @param evictLive whether eviction may take committed entries ({@code eviction=lru}) or only what no one can
     *     read any more ({@code eviction=refuse})
     */
    ShmSpace(MemorySegment map, ShmLayout lay, EntryTable entries, BlockAllocator blocks, LeaseTable leases,
             ShmIndex index, EventRing events, Path path, boolean evictLive) {
        this.lay = lay;
        this.entries = entries;
        this.blocks = blocks;
        this.leases = leases;
        this.path = path;
        this.eviction = new ClockEviction(map, entries, leases, index, events, this, evictLive);
        this.recovery = new Recovery(entries, blocks, leases, index, this, path, lay.blockSize());
    }

    /** What repairs the file after a crash; the lock runs its rebuild when it takes over from a dead holder. */
    Recovery recovery() {
        return recovery;
    }

    /**
     * Takes a free entry and a run of {@code n} free blocks, evicting and reaping as needed, and marks the entry
     * WRITING under this process's token for a value of {@code len} bytes. Returns the entry, or {@link #NO_ENTRY}
     * / {@link #NO_RUN} when there is no room (nothing taken).
     */
    int allocate(KeyScratch k, long n, long len, long now) {
        int e = NO_ENTRY;
        boolean reaped = false;
        while (true) {
            if (e < 0) {
                e = takeRecord();
            }
            long first = e < 0 ? -1 : blocks.allocate(n);
            if (first >= 0) {
                entries.begin(e, k, first, n, len, now);
                return e;
            }
            if (eviction.evictOne(now)) {
                continue;
            }
            if (!reaped) {
                recovery.reap();
                reaped = true;
                continue;
            }
            if (e >= 0) {
                entries.push(e);
                return NO_RUN;
            }
            return NO_ENTRY;
        }
    }

    private int takeRecord() {
        int e = entries.pop();
        while (e == EntryTable.CORRUPT_LIST) {
            recovery.rebuild();
            e = entries.pop();
        }
        return e;
    }

    /** Marks an unindexed entry retired and frees it unless a reader holds a lease; returns whether freed. */
    boolean retire(int e) {
        entries.setState(e, RETIRED);
        entries.addRetired(1);
        if (!leases.leased(e)) {
            free(e);
            return true;
        }
        return false;
    }

    /** Frees a retired entry that no lease names any more: what the last reader out and the close call. */
    void freeIfUnleased(int e) {
        if (entries.state(e) == RETIRED && !leases.leased(e)) {
            free(e);
        }
    }

    /** Returns the entry's blocks and record; an entry whose numbers do not check out sends the file to a rebuild. */
    void free(int e) {
        long off = entries.payloadOffset(e);
        long n = entries.blocks(e);
        long len = entries.valueLength(e);
        if (entries.state(e) == RETIRED) {
            entries.addRetired(-1);
        }
        if (!entries.payloadInBounds(off, n, len)) {
            LOG.warn("entry {} of {} has payload offset={} blocks={} length={} outside {} bytes; repairing", e, path,
                    off, n, len, lay.capacity());
            entries.setState(e, FREE);
            recovery.rebuild();
            return;
        }
        blocks.free(off / lay.blockSize(), n);
        entries.clearBlocks(e);
        entries.setState(e, FREE);
        entries.push(e);
    }
}
