package dev.kvconnector.proxy;

import dev.kvconnector.events.KvEventReader;
import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

/**
 * Where each chunk's KV is, learned from the engines' KV events: a map from chunk hash, keyed by its 64 bits
 * ({@link KvEventReader#hashKey(String)}), to which publishers hold it in their own cache and which report it in the
 * shared store. A publisher is one engine's event stream, numbered 0 to {@value #MAX_PUBLISHERS}-1, one bit of a mask.
 *
 * <p>Because hashes are chained (each binds every token before it), a prompt's cached prefix is the run of its
 * chunk hashes present from the first one; {@link #match} walks that run once for every publisher at a time.
 *
 * <p>Thread-safe: feed threads update it, request threads read it, and a read never waits for a feed. The map is
 * {@value #STRIPES} stripes by key, each an open-addressing table (linear probing, deletion by backward shift, so no
 * tombstones) of key, local mask and store mask, guarded by a {@link StampedLock}. An update holds its stripe's write
 * lock for one entry; a lookup reads without locking and validates the stamp afterwards, taking the read lock only
 * when writes overlapped it twice. Updates and lookups allocate nothing (a stripe's table grows by doubling).
 *
 * <p>It replaced a {@code ConcurrentHashMap<String, Entry>} of immutable entries: under a flood of 10^5 events a
 * second that allocated a key string, an entry, a node and a lambda per event. No well-kept library has a concurrent
 * map from long keys with lock-free reads (Agrona's, fastutil's and Eclipse Collections' primitive maps are
 * single-threaded), so it is written here; proxy/README.md has the measurement.
 */
final class PrefixIndex {
    /** Publishers one index tells apart: one bit each. */
    static final int MAX_PUBLISHERS = 64;
    private static final int STRIPES = 64;
    private static final int STRIPE_SHIFT = Long.SIZE - Integer.numberOfTrailingZeros(STRIPES);
    private static final int FIRST_SLOTS = 64;
    /** Optimistic reads tried before a lookup takes its stripe's read lock. */
    private static final int OPTIMISTIC_TRIES = 2;

    /** One stripe's slots; a slot is free when both masks are 0. Its size never changes: growing replaces it. */
    private static final class Table {
        final long[] keys;
        final long[] local;
        final long[] store;
        final int mask;

        Table(int slots) {
            keys = new long[slots];
            local = new long[slots];
            store = new long[slots];
            mask = slots - 1;
        }

        /** The slot holding {@code key}, or -1; on a table read without the lock, bounded and maybe wrong. */
        int find(long key, long mixed) {
            for (int i = (int) mixed & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
                if (local[i] == 0 && store[i] == 0) {
                    return -1;
                }
                if (keys[i] == key) {
                    return i;
                }
            }
            return -1;
        }

        /** Puts absent {@code key} in the first free slot of its run, with the masks given; returns the slot. */
        int put(long key, long mixed, long localMask, long storeMask) {
            int i = (int) mixed & mask;
            while (local[i] != 0 || store[i] != 0) {
                i = (i + 1) & mask;
            }
            keys[i] = key;
            local[i] = localMask;
            store[i] = storeMask;
            return i;
        }
    }

    private static final class Stripe {
        final StampedLock lock = new StampedLock();
        /** Replaced, never resized, under the write lock; read optimistically. */
        Table table = new Table(FIRST_SLOTS);
        volatile int size;
    }

    private final Stripe[] stripes = new Stripe[STRIPES];

    PrefixIndex() {
        Arrays.setAll(stripes, i -> new Stripe());
    }

    /** The key's bits spread over the word: the top ones pick the stripe, the low ones the slot. */
    private static long mix(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return h ^ (h >>> 29);
    }

    private Stripe stripe(long mixed) {
        return stripes[(int) (mixed >>> STRIPE_SHIFT)];
    }

    /**
     * Whether a medium is the shared store: a store URI ({@code shm:}, {@code valkey://}, ...), not an engine's own
     * medium ({@code GPU}, {@code CPU}, or none), nor {@code memory:}, which lives in one process and so is that
     * engine's own.
     */
    static boolean isSharedStore(String medium) {
        return medium != null && medium.indexOf(':') > 0 && !medium.startsWith("memory:");
    }

    /** {@code publisher} holds {@code hash} in its own cache or, with {@code store}, put it in the shared store. */
    void stored(int publisher, String hash, boolean store) {
        stored(publisher, KvEventReader.hashKey(hash), store);
    }

    /** {@link #stored(int, String, boolean)} by the hash's key. */
    void stored(int publisher, long key, boolean store) {
        update(publisher, key, store, true);
    }

    /**
     * Sets ({@code stored}) or clears {@code publisher}'s bit in {@code key}'s local or store mask under its stripe's
     * write lock; an entry that gains its first bit is added, one that loses its last is removed.
     */
    private void update(int publisher, long key, boolean store, boolean stored) {
        long bit = 1L << publisher;
        long mixed = mix(key);
        Stripe s = stripe(mixed);
        long stamp = s.lock.writeLock();
        try {
            Table t = s.table;
            int i = t.find(key, mixed);
            if (stored) {
                if (i < 0) {
                    if (s.size + 1 > (t.mask + 1) / 2) {
                        t = grow(s, t);
                    }
                    i = t.put(key, mixed, 0, 0);
                    s.size++;
                }
                if (store) {
                    t.store[i] |= bit;
                } else {
                    t.local[i] |= bit;
                }
            } else if (i >= 0) {
                if (store) {
                    t.store[i] = 0;
                } else {
                    t.local[i] &= ~bit;
                }
                if (t.local[i] == 0 && t.store[i] == 0) {
                    shiftBack(t, i);
                    s.size--;
                }
            }
        } finally {
            s.lock.unlockWrite(stamp);
        }
    }

    private static Table grow(Stripe s, Table t) {
        Table bigger = new Table(2 * (t.mask + 1));
        for (int i = 0; i <= t.mask; i++) {
            if (t.local[i] != 0 || t.store[i] != 0) {
                bigger.put(t.keys[i], mix(t.keys[i]), t.local[i], t.store[i]);
            }
        }
        s.table = bigger;
        return bigger;
    }

    /**
     * {@code hash} left {@code publisher}'s own cache or, with {@code store}, the shared store: then it is gone for
     * everyone, whoever stored it.
     */
    void removed(int publisher, String hash, boolean store) {
        removed(publisher, KvEventReader.hashKey(hash), store);
    }

    /** {@link #removed(int, String, boolean)} by the hash's key. */
    void removed(int publisher, long key, boolean store) {
        update(publisher, key, store, false);
    }

    /**
     * Frees slot {@code free} of a linear-probing table: each entry after it in the run moves back into the hole
     * unless its home slot lies cyclically after the hole and at or before where it is.
     */
    private static void shiftBack(Table t, int free) {
        for (int j = (free + 1) & t.mask; t.local[j] != 0 || t.store[j] != 0; j = (j + 1) & t.mask) {
            int home = (int) mix(t.keys[j]) & t.mask;
            boolean stays = free <= j ? free < home && home <= j : free < home || home <= j;
            if (!stays) {
                t.keys[free] = t.keys[j];
                t.local[free] = t.local[j];
                t.store[free] = t.store[j];
                t.local[j] = 0;
                t.store[j] = 0;
                free = j;
            }
        }
        t.local[free] = 0;
        t.store[free] = 0;
    }

    /** Forgets everything {@code publisher} reported (a resynchronisation starts here). O(chunks). */
    void clear(int publisher) {
        long keep = ~(1L << publisher);
        for (Stripe s : stripes) {
            long stamp = s.lock.writeLock();
            try {
                Table t = s.table;
                Table kept = new Table(t.mask + 1);
                int size = 0;
                for (int i = 0; i <= t.mask; i++) {
                    long local = t.local[i] & keep;
                    long store = t.store[i] & keep;
                    if (local != 0 || store != 0) {
                        kept.put(t.keys[i], mix(t.keys[i]), local, store);
                        size++;
                    }
                }
                s.table = kept;
                s.size = size;
            } finally {
                s.lock.unlockWrite(stamp);
            }
        }
    }

    /** Chunks indexed. */
    long size() {
        long n = 0;
        for (Stripe s : stripes) {
            n += s.size;
        }
        return n;
    }

    /** Chunks some publisher reported in the shared store. O(chunks): for metrics. */
    long storeChunks() {
        long n = 0;
        for (Stripe s : stripes) {
            long stamp = s.lock.readLock();
            try {
                for (long m : s.table.store) {
                    n += m != 0 ? 1 : 0;
                }
            } finally {
                s.lock.unlockRead(stamp);
            }
        }
        return n;
    }

    /** Whether {@code publisher} holds {@code hash}, in its cache or the store: for tests. */
    boolean holds(int publisher, String hash, boolean store) {
        long[] masks = new long[2];
        lookup(KvEventReader.hashKey(hash), masks);
        return ((store ? masks[1] : masks[0]) & (1L << publisher)) != 0;
    }

    /** Reads {@code key}'s local and store masks into {@code out[0]} and {@code out[1]} (0 when absent). */
    private void lookup(long key, long[] out) {
        long mixed = mix(key);
        Stripe s = stripe(mixed);
        for (int k = 0; k < OPTIMISTIC_TRIES; k++) {
            long stamp = s.lock.tryOptimisticRead();
            if (stamp != 0) {
                read(s.table, key, mixed, out);
                if (s.lock.validate(stamp)) {
                    return;
                }
            }
        }
        long stamp = s.lock.readLock();
        try {
            read(s.table, key, mixed, out);
        } finally {
            s.lock.unlockRead(stamp);
        }
    }

    private static void read(Table t, long key, long mixed, long[] out) {
        int i = t.find(key, mixed);
        out[0] = i < 0 ? 0 : t.local[i];
        out[1] = i < 0 ? 0 : t.store[i];
    }

    /**
     * The cached prefix of a prompt whose chunk hashes are {@code hashes}: how many leading chunks the shared store
     * holds, and for each publisher how many leading chunks its own cache holds ({@code localOut[p]}, which is
     * filled from 0).
     *
     * @return leading chunks in the shared store
     */
    int match(String[] hashes, int[] localOut) {
        Arrays.fill(localOut, 0);
        long[] masks = new long[2];
        long holding = -1L;
        int storePrefix = 0;
        boolean storeRun = true;
        for (int c = 0; c < hashes.length && (holding != 0 || storeRun); c++) {
            lookup(KvEventReader.hashKey(hashes[c]), masks);
            long local = masks[0];
            long dropped = holding & ~local;
            while (dropped != 0) {
                int p = Long.numberOfTrailingZeros(dropped);
                localOut[p] = c;
                dropped &= dropped - 1;
            }
            holding &= local;
            if (storeRun && masks[1] != 0) {
                storePrefix = c + 1;
            } else {
                storeRun = false;
            }
        }
        while (holding != 0) {
            int p = Long.numberOfTrailingZeros(holding);
            localOut[p] = hashes.length;
            holding &= holding - 1;
        }
        return storePrefix;
    }
}
