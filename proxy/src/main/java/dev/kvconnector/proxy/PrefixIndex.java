package dev.kvconnector.proxy;

import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where each chunk's KV is, learned from the engines' KV events: a map from chunk hash (lower-case hex, the key
 * scheme's chained hash) to which publishers hold it in their own cache and which report it in the shared store.
 * A publisher is one engine's event stream, numbered 0 to {@value #MAX_PUBLISHERS}-1, one bit of a mask.
 *
 * <p>Because hashes are chained (each binds every token before it), a prompt's cached prefix is the run of its
 * chunk hashes present from the first one; {@link #match} walks that run once for every publisher at a time.
 *
 * <p>Thread-safe: each feed thread updates, request threads read without locks. An entry is immutable and replaced
 * per update ({@link ConcurrentHashMap#compute}); an entry held by nobody is removed.
 */
final class PrefixIndex {
    /** Publishers one index tells apart: one bit each. */
    static final int MAX_PUBLISHERS = 64;

    /** @param local publishers holding the chunk in their own cache; @param store publishers that stored it in the shared store */
    private record Entry(long local, long store) {
    }

    private final ConcurrentHashMap<String, Entry> chunks = new ConcurrentHashMap<>();

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
        long bit = 1L << publisher;
        chunks.compute(hash, (h, e) -> e == null ? (store ? new Entry(0, bit) : new Entry(bit, 0))
                : store ? new Entry(e.local, e.store | bit) : new Entry(e.local | bit, e.store));
    }

    /**
     * {@code hash} left {@code publisher}'s own cache or, with {@code store}, the shared store: then it is gone for
     * everyone, whoever stored it.
     */
    void removed(int publisher, String hash, boolean store) {
        long bit = 1L << publisher;
        chunks.computeIfPresent(hash, (h, e) -> {
            Entry n = store ? new Entry(e.local, 0) : new Entry(e.local & ~bit, e.store);
            return n.local == 0 && n.store == 0 ? null : n;
        });
    }

    /** Forgets everything {@code publisher} reported (a resynchronisation starts here). O(chunks). */
    void clear(int publisher) {
        long keep = ~(1L << publisher);
        chunks.replaceAll((h, e) -> new Entry(e.local & keep, e.store & keep));
        chunks.values().removeIf(e -> e.local == 0 && e.store == 0);
    }

    /** Chunks indexed. */
    long size() {
        return chunks.mappingCount();
    }

    /** Chunks some publisher reported in the shared store. O(chunks): for metrics. */
    long storeChunks() {
        return chunks.values().stream().filter(e -> e.store != 0).count();
    }

    /** Whether {@code publisher} holds {@code hash}, in its cache or the store: for tests. */
    boolean holds(int publisher, String hash, boolean store) {
        Entry e = chunks.get(hash);
        return e != null && ((store ? e.store : e.local) & (1L << publisher)) != 0;
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
        long holding = -1L;
        int storePrefix = 0;
        boolean storeRun = true;
        for (int c = 0; c < hashes.length && (holding != 0 || storeRun); c++) {
            Entry e = chunks.get(hashes[c]);
            long local = e == null ? 0 : e.local;
            long dropped = holding & ~local;
            while (dropped != 0) {
                int p = Long.numberOfTrailingZeros(dropped);
                localOut[p] = c;
                dropped &= dropped - 1;
            }
            holding &= local;
            if (storeRun && e != null && e.store != 0) {
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
