package dev.kvconnector.connector;

import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Locale;

/**
 * What both inserts of a {@link StoreConnector} share, whatever their codec completes objects by: the session's
 * state, the checks of every call (layer range, a layer put twice, the hidden states' shape, a commit with a layer
 * missing), the layers put so far, and the puts in flight ({@link PendingPuts}). Subclasses move the bytes.
 */
abstract class StoreInsertBase implements InsertSession, InsertChannel {
    private enum State { OPEN, COMMITTED, ABORTED }

    final StoreConnector connector;
    ChunkGeometry geo;
    ObjectPlan objects;
    final KVLayout layout;
    int tokens;
    /** Whether each layer was put (or handed on); set by the subclasses' put paths. */
    final boolean[] layerPut;
    final PendingPuts pending;
    boolean hiddenPut;
    /** Keys and batch arrays for the calls over every chunk, from the connector's pool; null once given back. */
    RequestScratch scratch;
    private State state = State.OPEN;
    /** The source of the last {@link #putLayer(int, PagedKVCache, TokenSlots)}, reused while its cache and slots are. */
    private PagedLayers paged;

    /** {@code puts} names the puts for the error handler: {@code layer put}, {@code chunk put}. */
    StoreInsertBase(StoreConnector connector, ChunkGeometry geo, String puts) {
        this.connector = connector;
        this.geo = geo;
        this.objects = geo.objects;
        this.layout = connector.layout();
        this.tokens = geo.plan.totalTokens();
        this.layerPut = new boolean[layout.numLayers()];
        this.pending = new PendingPuts(connector, puts);
        this.scratch = connector.scratch().take(geo.chunks.length, geo.chunks.length);
    }

    @Override
    public final int tokens() {
        return tokens;
    }

    @Override
    public final void putLayer(int layer, LayerSource source) {
        checkLayer(layer);
        source.check(layout, tokens, "insert", connector.endpoint());
        source.insert(this, layer, 1);
    }

    /** {@inheritDoc} Layer after layer of the same cache and slots reuse one source. */
    @Override
    public final void putLayer(int layer, PagedKVCache cache, TokenSlots slots) {
        if (paged == null || paged.cache() != cache || paged.slots() != slots) {
            paged = LayerSource.paged(cache, slots);
        }
        putLayer(layer, paged);
    }

    @Override
    public final void putLayers(LayerSource source) {
        for (int l = 0; l < layerPut.length; l++) {
            checkLayer(l);
        }
        source.check(layout, tokens, "insert", connector.endpoint());
        source.insert(this, 0, layerPut.length);
    }

    @Override
    public final ChunkGeometry geometry() {
        return geo;
    }

    @Override
    public final ConnectorResources resources() {
        return connector.resources();
    }

    @Override
    public final MemorySegment acquireStaging(long bytes) {
        return pending.acquire(bytes);
    }

    @Override
    public final void releaseStaging(MemorySegment staging) {
        connector.staging().release(staging);
    }

    /**
     * Checks {@code hidden} for {@code putHidden}: open session, host-accessible, {@code [tokens, hiddenSize]}, not
     * put before.
     */
    final void checkHidden(Tensor hidden) {
        checkOpen("putHidden");
        hidden.requireHostAccessible("putHidden");
        TensorSpec s = hidden.spec();
        if (s.rank() != 2 || s.dim(0) != tokens || s.dim(1) != layout.hiddenSize()) {
            throw usage(ErrorCode.SHAPE_MISMATCH, "hidden states are " + s + ", expected [" + tokens + ", "
                    + layout.hiddenSize() + "]");
        }
        if (hiddenPut) {
            throw usage(ErrorCode.INVALID_ARGUMENT, "hidden states were already put");
        }
    }

    /** Offset of each chunk's hidden-state object in one staging segment, and its size at the last index. */
    final long[] hiddenOffsets(Tensor hidden) {
        int n = geo.chunks.length;
        long[] offsets = new long[n + 1];
        for (int c = 0; c < n; c++) {
            offsets[c + 1] = offsets[c] + ChunkGeometry.align(objects.hiddenObjectBytes(c, hidden.spec().dtype()));
        }
        return offsets;
    }

    /**
     * The start of {@code commit}: an open session whose puts are all done and none failed, and every layer put;
     * otherwise the insert is aborted and the reason thrown.
     */
    final void beginCommit() {
        checkOpen("commit");
        awaitPuts();
        for (int l = 0; l < layerPut.length; l++) {
            if (!layerPut[l]) {
                abort();
                throw usage(ErrorCode.INVALID_ARGUMENT, "layer " + l + " of " + layerPut.length
                        + " was never put; the insert was aborted");
            }
        }
    }

    /** Waits for the puts in flight; aborts the insert and throws the first failure, if one failed. */
    final void awaitPuts() {
        pending.await();
        Throwable f = pending.failure();
        if (f != null) {
            abort();
            throw f instanceof KVException ke ? ke : KVException.of(ErrorCode.INTERNAL, "a put failed: " + f)
                    .store(connector.endpoint()).operation("commit").cause(f).build();
        }
    }

    /** Marks the insert committed and counts it. */
    final void committed(int chunks) {
        state = State.COMMITTED;
        releaseScratch();
        connector.metricsRecorder().recordCommit();
        connector.emitStored(geo, chunks);
    }

    @Override
    public final void abort() {
        if (state != State.OPEN) {
            return;
        }
        state = State.ABORTED;
        pending.await();
        removeWritten();
        releaseScratch();
        connector.metricsRecorder().recordAbort();
    }

    /** Whether the insert has ended (committed or aborted), so that {@link #restart} may reuse the session. */
    final boolean ended() {
        return state != State.OPEN;
    }

    /** Reuses this ended session for a new request of {@code geometry}: open, with nothing put. */
    void restart(ChunkGeometry geometry) {
        this.geo = geometry;
        this.objects = geometry.objects;
        this.tokens = geometry.plan.totalTokens();
        Arrays.fill(layerPut, false);
        hiddenPut = false;
        pending.reset();
        scratch = connector.scratch().take(geometry.chunks.length, geometry.chunks.length);
        state = State.OPEN;
    }

    private void releaseScratch() {
        if (scratch != null) {
            connector.scratch().give(scratch);
            scratch = null;
        }
    }

    /** After an abort, with no put in flight: releases what the insert holds and removes what it wrote. */
    abstract void removeWritten();

    @Override
    public final void close() {
        abort();
    }

    private void checkLayer(int layer) {
        checkOpen("putLayer");
        if (layer < 0 || layer >= layerPut.length) {
            throw usage(ErrorCode.INVALID_ARGUMENT, "layer " + layer + " outside 0.." + (layerPut.length - 1));
        }
        if (layerPut[layer]) {
            throw usage(ErrorCode.INVALID_ARGUMENT, "layer " + layer + " was already put");
        }
        Throwable f = pending.failure();
        if (f != null) {
            throw f instanceof KVException ke ? ke : KVException.of(ErrorCode.INTERNAL, "an earlier put failed")
                    .store(connector.endpoint()).operation("putLayer").cause(f).build();
        }
    }

    final void checkOpen(String op) {
        if (state != State.OPEN) {
            throw KVException.of(ErrorCode.CLOSED, "the insert was already " + state.name().toLowerCase(Locale.ROOT))
                    .operation(op).build();
        }
    }

    final KVException usage(ErrorCode code, String detail) {
        return KVException.of(code, detail).store(connector.endpoint()).operation("insert").build();
    }
}
