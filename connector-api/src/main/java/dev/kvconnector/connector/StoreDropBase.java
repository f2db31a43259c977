package dev.kvconnector.connector;

import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * What both drop-selects of a {@link StoreConnector} share, whatever their codec completes objects by: the request
 * and its target, the layer-wise wait for objects the producer has not stored yet, the hidden states, the
 * consume-mode removal and the progress that {@link #awaitLayer} and {@link #result()} read. Subclasses load the
 * layers.
 */
abstract class StoreDropBase implements DropSession {
    private static final long MIN_BACKOFF_NANOS = 10_000;
    private static final long MAX_BACKOFF_NANOS = 1_000_000;

    final StoreConnector connector;
    final KVStore store;
    ChunkGeometry geo;
    ObjectPlan objects;
    DropTarget target;
    DropMode mode;
    final boolean streaming;
    long deadlineNanos;
    int requestedTokens;
    final DropProgress progress;
    /** The load and its events, made once per session so that a reused session's run allocates nothing. */
    private final Supplier<DropResult> loadAndEmit;
    /** {@link #run}, for the connector's I/O threads; made once per session. */
    final Runnable runner;
    /** The last hit this session returned, returned again for a hit of the same tokens (results are values). */
    private DropResult lastHit;
    /** The keys and batch arrays of the load while {@link #run} runs, else null. */
    RequestScratch scratch;
    /** Time the object being read spent polling for the producer, in ns, added up by {@link #getWaiting}. */
    long waitedNanos;
    /** Why no producer will come ({@link #abandon}), or null: the layer-wise wait then stops at once. */
    private volatile String abandoned;

    StoreDropBase(StoreConnector connector, ChunkGeometry geo, DropTarget target, DropMode mode, boolean streaming,
                  long timeoutNanos, int requestedTokens) {
        this.connector = connector;
        this.store = connector.store();
        this.geo = geo;
        this.objects = geo.objects;
        this.target = target;
        this.mode = mode;
        this.streaming = streaming;
        this.deadlineNanos = System.nanoTime() + timeoutNanos;
        this.requestedTokens = requestedTokens;
        this.progress = new DropProgress(connector, streaming);
        this.loadAndEmit = this::loadInScratch;
        this.runner = this::run;
    }

    /** Runs the load; a failure (not a miss) is kept and rethrown to whoever waits. */
    final void run() {
        progress.run(loadAndEmit);
    }

    /**
     * The load, with scratch room for every object's key of every chunk (a consume removes them all at once), given
     * back before any waiter hears the result: once {@link #ended()}, the session holds nothing of its run.
     */
    private DropResult loadInScratch() {
        scratch = connector.scratch().take(geo.chunks.length * (connector.layout().numLayers() + 2),
                geo.chunks.length);
        try {
            return connector.emitResult(geo, load());
        } finally {
            connector.scratch().give(scratch);
            scratch = null;
        }
    }

    /** Whether the load has ended, whatever its outcome, so that {@link #restart} may reuse the session. */
    final boolean ended() {
        return progress.isDone();
    }

    /** Loads the request into the target: a hit, or a miss with its reason. */
    abstract DropResult load();

    /** Reuses this session, whose load has {@link #ended()}, for another request, as if made anew with these. */
    void restart(ChunkGeometry geometry, DropTarget into, DropMode dropMode, long timeoutNanos, int tokens) {
        this.geo = geometry;
        this.objects = geometry.objects;
        this.target = into;
        this.mode = dropMode;
        this.deadlineNanos = System.nanoTime() + timeoutNanos;
        this.requestedTokens = tokens;
        this.waitedNanos = 0;
        this.abandoned = null;
        progress.reset();
    }

    /** A hit of {@code matched} of the requested tokens. */
    final DropResult hit(int matched) {
        DropResult last = lastHit;
        if (last == null || last.matchedTokens() != matched || last.requestedTokens() != requestedTokens) {
            last = DropResult.hit(matched, requestedTokens);
            lastHit = last;
        }
        return last;
    }

    /**
     * Reads {@code key} into {@code dst}; streaming, polls until the key appears or the deadline passes, backing off
     * from 10 us to 1 ms, and adds the time until the last poll began to {@link #waitedNanos}.
     */
    final long getWaiting(StoreKey key, MemorySegment dst) {
        return readWaiting(key, dst, null);
    }

    /** {@link KVStore#tryView} into {@code view}, polled as {@link #getWaiting} polls. */
    final long viewWaiting(StoreKey key, StoreView view) {
        return readWaiting(key, null, view);
    }

    private long readWaiting(StoreKey key, MemorySegment dst, StoreView view) {
        long backoff = MIN_BACKOFF_NANOS;
        long first = System.nanoTime();
        while (true) {
            long poll = System.nanoTime();
            long r = view != null ? store.tryView(key, view) : store.getInto(key, dst);
            if (!GetResult.isMiss(r) || !streaming || abandoned != null || System.nanoTime() - deadlineNanos >= 0) {
                // The last read is the copy itself; the polls and sleeps before it were the wait.
                waitedNanos += poll - first;
                return r;
            }
            LockSupport.parkNanos(backoff);
            backoff = Math.min(MAX_BACKOFF_NANOS, backoff * 2);
        }
    }

    /**
     * The miss of {@code what}, which a layer-wise load waited for in vain: {@link MissReason#ABSENT} naming why no
     * producer will come, when the load was abandoned; else {@link MissReason#TIMED_OUT}.
     */
    final DropResult waitedMiss(String what) {
        String why = abandoned;
        return why != null ? DropResult.miss(requestedTokens, MissReason.ABSENT, what + " will not arrive: " + why)
                : DropResult.miss(requestedTokens, MissReason.TIMED_OUT, what + " did not arrive within "
                        + connector.layerTimeoutMillis() + " ms");
    }

    @Override
    public final boolean abandon(String why) {
        Objects.requireNonNull(why, "why");
        if (!streaming || progress.isDone()) {
            return false;
        }
        abandoned = why;
        return true;
    }

    /** The miss for a codec status of {@code key}'s object, or null when it is {@link ObjectPlan#OK}. */
    final DropResult statusMiss(int status, StoreKey key) {
        if (status == ObjectPlan.OK) {
            return null;
        }
        return DropResult.miss(requestedTokens, objects.isLayoutMismatch(status) ? MissReason.LAYOUT_MISMATCH
                : MissReason.CORRUPT, "object " + key + ": " + objects.describe(status));
    }

    /**
     * Reads the first {@code chunks} chunks' hidden-state objects, checks each with the codec and copies its rows
     * into the target's hidden tensor; the first absent, short or damaged one is the miss.
     *
     * @throws KVException {@code SHAPE_MISMATCH} when the target's hidden tensor cannot hold the rows
     */
    final DropResult readHidden(int chunks) {
        Tensor hidden = target.hidden();
        TensorSpec hs = hidden.spec();
        int hiddenSize = connector.layout().hiddenSize();
        if (hs.rank() != 2 || hs.dim(1) != hiddenSize || hs.dim(0) < geo.chunks[chunks - 1].endToken()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "hidden target " + hs + " cannot hold "
                    + geo.chunks[chunks - 1].endToken() + " x " + hiddenSize).store(store.uri())
                    .operation("dropSelect").build();
        }
        DType dtype = hs.dtype();
        long rowBytes = (long) hiddenSize * dtype.byteWidth();
        for (int c = 0; c < chunks; c++) {
            DropResult absent = hiddenAbsent(c);
            if (absent != null) {
                return absent;
            }
            long size = objects.hiddenObjectBytes(c, dtype);
            MemorySegment staging = DropStaging.acquire(connector, size);
            if (staging == null) {
                return DropStaging.full(connector, requestedTokens, size);
            }
            try {
                MemorySegment object = staging.asSlice(0, size);
                StoreKey key = objects.hiddenKey(c, scratch.keys[0]);
                long r = getWaiting(key, object);
                if (GetResult.isMiss(r) || GetResult.isTooSmall(r)) {
                    return DropResult.miss(requestedTokens, GetResult.isMiss(r) ? MissReason.ABSENT
                            : MissReason.LAYOUT_MISMATCH, "hidden-state object " + key + (GetResult.isMiss(r)
                            ? " is absent" : " holds " + GetResult.requiredSize(r) + " bytes, expected " + size));
                }
                DropResult miss = statusMiss(objects.validateHidden(c, dtype, object, r), key);
                if (miss != null) {
                    return miss;
                }
                MemorySegment.copy(object, objects.hiddenOffset(c), hidden.segment(),
                        geo.chunks[c].startToken() * rowBytes, geo.chunks[c].tokens() * rowBytes);
            } finally {
                connector.staging().release(staging);
            }
        }
        return null;
    }

    /** The miss when chunk {@code c} is known to have no hidden states before any read, else null. */
    abstract DropResult hiddenAbsent(int c);

    /** Consume mode: removes {@code keys[0..count)}, the first {@code chunks} chunks' objects, and says so. */
    final void consume(StoreKey[] keys, int count, int chunks) {
        if (connector.consumeOrKeep(keys, count)) {
            connector.emitConsumed(geo, chunks);
        }
    }

    @Override
    public final boolean awaitLayer(int layer) {
        return progress.awaitLayer(layer);
    }

    @Override
    public final DropResult result() {
        return progress.result();
    }

    @Override
    public final void close() {
        progress.awaitDone();
    }
}
