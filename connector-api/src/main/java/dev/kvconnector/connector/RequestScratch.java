package dev.kvconnector.connector;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * One session's reusable arrays and handles: the keys of its request's objects, the segments, results and flags of a
 * batch call over its chunks, and the store's claim and view handles. Its pool belongs to one connector, so the
 * handles to that connector's store. A session takes one from its connector's {@link Pool} when it starts and gives
 * it back when it ends, so that a steady stream of requests allocates none. Used by one thread at a time.
 */
final class RequestScratch {
    StoreKey[] keys = new StoreKey[0];
    MemorySegment[] segments = new MemorySegment[0];
    long[] results = new long[0];
    boolean[] stored = new boolean[0];
    private StoreClaim claim;
    private StoreView view;
    /** The manifest slices of {@link #manifestsIn}, and the staging segment they slice. */
    private MemorySegment[] manifests = new MemorySegment[0];
    private MemorySegment manifestStaging;

    /**
     * The first {@code chunks} manifest slots of {@code staging}, one manifest each, {@link ChunkGeometry#align}ed
     * apart. The staging pool hands the segment it was given back last out first, so the slices of the last call are
     * usually still those of this one, and are then not made again.
     */
    MemorySegment[] manifestsIn(MemorySegment staging, int chunks) {
        if (staging != manifestStaging || manifests.length < chunks) {
            long slot = ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES);
            manifests = new MemorySegment[chunks];
            for (int c = 0; c < chunks; c++) {
                manifests[c] = staging.asSlice(c * slot, ChunkGeometry.MANIFEST_BYTES);
            }
            manifestStaging = staging;
        }
        return manifests;
    }

    /** The store's claim handle ({@code CLAIM}), made on first use and kept with this scratch. */
    StoreClaim claim(KVStore store) {
        if (claim == null) {
            claim = store.newClaim();
        }
        return claim;
    }

    /** The store's view handle ({@code VIEW}), made on first use and kept with this scratch. */
    StoreView view(KVStore store) {
        if (view == null) {
            view = store.newView();
        }
        return view;
    }

    /** {@code count} new, empty keys. */
    static StoreKey[] newKeys(int count) {
        StoreKey[] keys = new StoreKey[count];
        for (int i = 0; i < count; i++) {
            keys[i] = new StoreKey();
        }
        return keys;
    }

    /** Grows the arrays to at least {@code keyCount} keys and {@code chunks} of the others. */
    private void ensure(int keyCount, int chunks) {
        if (keys.length < keyCount) {
            keys = newKeys(keyCount);
        }
        if (segments.length < chunks) {
            segments = new MemorySegment[chunks];
            results = new long[chunks];
            stored = new boolean[chunks];
        }
    }

    /** The idle scratch of a connector; thread-safe. */
    static final class Pool {
        /** Idle scratch kept at most; more sessions at once than this allocate what they need. */
        private static final int MAX_IDLE = 64;

        private final IdlePool<RequestScratch> idle = new IdlePool<>(MAX_IDLE);

        /** Scratch with room for {@code keyCount} keys and batches of {@code chunks}. */
        RequestScratch take(int keyCount, int chunks) {
            RequestScratch s = idle.poll();
            if (s == null) {
                s = new RequestScratch();
            }
            s.ensure(keyCount, chunks);
            return s;
        }

        /** Gives {@code s}, which its session no longer uses, back. */
        void give(RequestScratch s) {
            Arrays.fill(s.segments, null);
            idle.offer(s);
        }
    }
}
