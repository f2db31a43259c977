package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.COMMITTED;
import static dev.kvconnector.store.shm.ShmLayout.FREE;
import static dev.kvconnector.store.shm.ShmLayout.MAX_KEY_BYTES;
import static dev.kvconnector.store.shm.ShmLayout.RETIRED;
import static dev.kvconnector.store.shm.ShmLayout.WRITING;

import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Crash recovery. Every lock, lease and unfinished put carries a process token, so what a dead process left can be
 * told from what a live one is doing: {@link #reap()} frees dead processes' slots, leases and unfinished puts (and
 * retired entries no lease names any more), and {@link #rebuild()} rebuilds every derived structure from the entry
 * table after a process died holding the lock. Both run under the store lock.
 */
final class Recovery {
    private static final Logger LOG = LoggerFactory.getLogger(Recovery.class);

    private final EntryTable entries;
    private final BlockAllocator blocks;
    private final LeaseTable leases;
    private final ShmIndex index;
    private final ShmSpace space;
    private final Path path;
    private final long blockSize;

    Recovery(EntryTable entries, BlockAllocator blocks, LeaseTable leases, ShmIndex index, ShmSpace space, Path path,
             long blockSize) {
        this.entries = entries;
        this.blocks = blocks;
        this.leases = leases;
        this.index = index;
        this.space = space;
        this.path = path;
        this.blockSize = blockSize;
    }

    /** Frees what dead processes left: process slots and leases, unfinished puts, then unleased retired entries. */
    void reap() {
        leases.reapDead();
        int mark = entries.watermark();
        for (int e = 0; e < mark; e++) {
            int st = entries.state(e);
            if (st == WRITING && !ProcessIdentity.isAlive(entries.owner(e))) {
                LOG.info("reclaiming entry {} of {}: its writer, process {}, died in a put it began {} ms ago", e,
                        path, ProcessIdentity.pid(entries.owner(e)),
                        System.currentTimeMillis() - entries.startedMillis(e));
                space.free(e);
            } else if (st == RETIRED && !leases.leased(e)) {
                space.free(e);
            }
        }
    }

    /**
     * Rebuilds the bitmap, the free list, the counters and the index from the entry table, after a process died
     * holding the lock or a number in the file did not check out. Entries whose numbers do not check out, or that
     * overlap a later one, are dropped; of two committed entries with one key, the later commit wins.
     */
    void rebuild() {
        index.beginRebuild();
        blocks.reset();
        int mark = entries.resetFreeList();
        long live = 0;
        long retired = 0;
        for (int e = mark - 1; e >= 0; e--) {
            if (!keep(e)) {
                entries.clearBlocks(e);
                entries.setState(e, FREE);
                entries.push(e);
                continue;
            }
            blocks.markUsed(entries.payloadOffset(e) / blockSize, entries.blocks(e));
            int st = entries.state(e);
            if (st == RETIRED) {
                retired++;
            } else if (st == COMMITTED) {
                if (indexOrRetire(e)) {
                    live++;
                } else {
                    retired++;
                }
            }
        }
        entries.setRetired(retired);
        index.endRebuild(live);
    }

    /** Whether entry {@code e} survives a rebuild: in use, with numbers that check out, on blocks no one else has. */
    private boolean keep(int e) {
        int st = entries.state(e);
        int keyLen = entries.keyLength(e);
        return (st == COMMITTED || st == RETIRED || st == WRITING && ProcessIdentity.isAlive(entries.owner(e)))
                && keyLen >= 0 && keyLen <= MAX_KEY_BYTES && entries.payloadInBounds(e)
                && blocks.isFree(entries.payloadOffset(e) / blockSize, entries.blocks(e));
    }

    /**
     * Indexes committed entry {@code e} unless an indexed entry has its key: then the later commit stays indexed and
     * the other is retired. Returns whether the index gained an entry.
     */
    private boolean indexOrRetire(int e) {
        int rival = index.rival(e);
        if (rival < 0) {
            index.insertFresh(e);
            return true;
        }
        int loser = entries.commitSeq(e) > entries.commitSeq(rival) ? rival : e;
        if (loser == rival) {
            index.repoint(rival, e);
        }
        entries.setState(loser, RETIRED);
        return false;
    }
}
