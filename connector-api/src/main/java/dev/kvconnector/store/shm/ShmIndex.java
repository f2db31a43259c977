package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;

/**
 * The hash index: open addressing with linear probing over a power-of-two slot table, at most half full of live
 * entries and rebuilt without tombstones when three quarters are used. A slot holds a 32-bit hash tag and an entry
 * number. Updates run under the store lock; {@link #probe} runs without it, leasing the entry it finds, and a
 * seqlock epoch (odd while a rebuild runs) keeps it from reporting a false miss during a rebuild.
 */
final class ShmIndex {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    /** {@link #probe}'s answer when no committed entry holds the key. */
    static final int MISS = -1;

    private final MemorySegment map;
    /** The slot table, sliced once: a rebuild empties it without allocating a slice each time. */
    private final MemorySegment slots;
    private final ShmLayout lay;
    private final EntryTable entries;
    private final LeaseTable leases;
    private final ShmLock lock;
    private final Path path;
    private final String uri;
    private final long mask;

    ShmIndex(MemorySegment map, ShmLayout lay, EntryTable entries, LeaseTable leases, ShmLock lock, Path path,
             String uri) {
        this.map = map;
        this.slots = map.asSlice(lay.indexOffset(), lay.slotCount() * 8);
        this.lay = lay;
        this.entries = entries;
        this.leases = leases;
        this.lock = lock;
        this.path = path;
        this.uri = uri;
        this.mask = lay.slotCount() - 1;
    }

    /**
     * Finds the committed entry for the key and leases it in process slot {@code procSlot}, without the lock.
     * Returns the entry, its state word left in {@code k.stateWord} and its lease held in {@code k.leaseOffset}
     * (expired or not: the caller decides), or {@link #MISS} with no lease named.
     */
    int probe(KeyScratch k, int procSlot) {
        int tag = (int) (k.hash >>> 32);
        restart:
        for (int attempt = 0; ; attempt++) {
            long epoch = stableEpoch();
            long i = k.hash & mask;
            for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
                long so = lay.slot(i);
                long w = (long) LONG.getVolatile(map, so);
                if (w == 0) {
                    break;
                }
                if (w == TOMBSTONE || (int) (w >>> 32) != tag) {
                    continue;
                }
                int e = slotEntry(w);
                leases.set(procSlot, k, e + 1L);
                // Dekker with the remover: it tombstones the slot and then scans leases; we lease, then re-read.
                if ((long) LONG.getVolatile(map, so) != w) {
                    leases.unname(k);
                    continue restart;
                }
                long sw = entries.stateWordAcquire(e);
                if ((sw & 0xFF) != COMMITTED || !entries.keyMatches(e, k)) {
                    leases.unname(k);
                    continue;
                }
                k.stateWord = sw;
                return e;
            }
            leases.drop(k);
            if ((long) LONG.getVolatile(map, H_INDEX_EPOCH) == epoch || attempt > 1000) {
                return MISS;
            }
        }
    }

    /** The index epoch when no rebuild runs; waits out a rebuild, and repairs one abandoned by a dead process. */
    private long stableEpoch() {
        for (int spins = 0; ; spins++) {
            long epoch = (long) LONG.getVolatile(map, H_INDEX_EPOCH);
            if ((epoch & 1) == 0) {
                return epoch;
            }
            if (spins > 10_000) {
                lock.lock();
                lock.unlock();
                spins = 0;
            }
            Thread.onSpinWait();
        }
    }

    /** The slot holding the key, or -1; under the lock. */
    long find(KeyScratch k) {
        int tag = (int) (k.hash >>> 32);
        long i = k.hash & mask;
        for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return -1;
            }
            if (w != TOMBSTONE && (int) (w >>> 32) == tag && entries.keyMatches(slotEntry(w), k)) {
                return i;
            }
        }
        return -1;
    }

    /** The entry that slot {@code slot} names. */
    int entryAt(long slot) {
        return slotEntry((long) LONG.get(map, lay.slot(slot)));
    }

    /** Points slot {@code slot}, which holds {@code k}, at entry {@code e}. */
    void replace(long slot, KeyScratch k, int e) {
        LONG.setVolatile(map, lay.slot(slot), slotWord(k.hash, e));
    }

    /** Drops the tombstones when one more key would use three quarters of the slots; before the entry commits. */
    void makeRoom() {
        if (word(map, H_USED_SLOTS) + 1 > lay.slotCount() * 3 / 4) {
            rebuild();
        }
    }

    /** Indexes entry {@code e} under a key not in the index yet; {@link #makeRoom()} made sure a slot is empty. */
    void add(KeyScratch k, int e) {
        long i = k.hash & mask;
        while (true) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0 || w == TOMBSTONE) {
                LONG.setVolatile(map, lay.slot(i), slotWord(k.hash, e));
                if (w == 0) {
                    setWord(map, H_USED_SLOTS, word(map, H_USED_SLOTS) + 1);
                } else {
                    setWord(map, H_TOMBSTONES, word(map, H_TOMBSTONES) - 1);
                }
                setWord(map, H_LIVE_ENTRIES, word(map, H_LIVE_ENTRIES) + 1);
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /** Tombstones the slot naming entry {@code e}, if any. */
    void remove(int e) {
        long i = entries.keyHash(e) & mask;
        for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return;
            }
            if (w != TOMBSTONE && (w & 0xFFFF_FFFFL) == e + 1L) {
                LONG.setVolatile(map, lay.slot(i), TOMBSTONE);
                setWord(map, H_TOMBSTONES, word(map, H_TOMBSTONES) + 1);
                setWord(map, H_LIVE_ENTRIES, word(map, H_LIVE_ENTRIES) - 1);
                return;
            }
        }
    }

    /** Committed entries in the index, read without the lock. */
    long live() {
        return (long) LONG.getVolatile(map, H_LIVE_ENTRIES);
    }

    /** Drops tombstones: clears the index and re-inserts every committed entry, under an odd epoch. */
    void rebuild() {
        beginRebuild();
        long live = 0;
        int mark = entries.watermark();
        for (int e = 0; e < mark; e++) {
            if (entries.state(e) == COMMITTED) {
                insertFresh(e);
                live++;
            }
        }
        endRebuild(live);
    }

    /**
     * Makes the epoch odd (or keeps it odd, when a dead process left it so) and empties the table, so that
     * {@link #insertFresh} can refill it; lock-free readers wait until {@link #endRebuild}.
     */
    void beginRebuild() {
        long epoch = word(map, H_INDEX_EPOCH);
        setEpoch((epoch & 1) == 1 ? epoch : epoch + 1);
        slots.fill((byte) 0);
        setWord(map, H_USED_SLOTS, 0);
        setWord(map, H_TOMBSTONES, 0);
    }

    /** Inserts entry {@code e} into a table being rebuilt (no tombstones, no duplicate keys). */
    void insertFresh(int e) {
        long hash = entries.keyHash(e);
        long i = hash & mask;
        while ((long) LONG.get(map, lay.slot(i)) != 0) {
            i = (i + 1) & mask;
        }
        LONG.setVolatile(map, lay.slot(i), slotWord(hash, e));
        setWord(map, H_USED_SLOTS, word(map, H_USED_SLOTS) + 1);
    }

    /** Ends a rebuild with {@code live} entries indexed: the epoch turns even again. */
    void endRebuild(long live) {
        setWord(map, H_LIVE_ENTRIES, live);
        setEpoch(word(map, H_INDEX_EPOCH) + 1);
    }

    /** An indexed entry with the same key as {@code e}, or -1; while rebuilding. */
    int rival(int e) {
        for (long i = entries.keyHash(e) & mask; ; i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return -1;
            }
            int r = slotEntry(w);
            if (entries.sameKey(e, r)) {
                return r;
            }
        }
    }

    /** Points the slot naming entry {@code from} at {@code to}, which holds the same key; while rebuilding. */
    void repoint(int from, int to) {
        long hash = entries.keyHash(from);
        for (long i = hash & mask; ; i = (i + 1) & mask) {
            if (((long) LONG.get(map, lay.slot(i)) & 0xFFFF_FFFFL) == from + 1L) {
                LONG.setVolatile(map, lay.slot(i), slotWord(hash, to));
                return;
            }
        }
    }

    /**
     * The index epoch is a seqlock for lock-free readers: fully fenced, so slot writes never move before the odd
     * value or after the even one.
     */
    private void setEpoch(long v) {
        LONG.setVolatile(map, H_INDEX_EPOCH, v);
    }

    private static long slotWord(long hash, int e) {
        return (hash >>> 32) << 32 | (e + 1L);
    }

    private int slotEntry(long w) {
        long e = (w & 0xFFFF_FFFFL) - 1;
        if (e < 0 || e >= lay.entryCount()) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "an index slot of " + path + " names entry " + e
                    + ", outside the " + lay.entryCount() + " entries").store(uri)
                    .hint("the file " + path + " was changed by something else; delete it if no process uses it")
                    .build();
        }
        return (int) e;
    }
}
