package dev.kvconnector.connector;

import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import dev.kvconnector.memory.WordSum;

/**
 * The {@link InsertSession} of a {@link StoreConnector}: each layer is copied into pooled staging before
 * {@code putLayer} returns, sealed by the codec and put on the connector's I/O threads, overlapping the next layer's
 * compute; {@link #commit()} writes the manifests, last. It is also the {@link InsertChannel} through which sources
 * that move layers themselves (device caches) hand them on.
 *
 * <p>Over 400 lines because its three put paths (claimed, staged, detached), the pooled put tasks, commit and abort
 * all share one piece of state, the session's count of puts in flight and their first failure; split apart, that
 * state would have to be exposed to each.
 */
final class StoreInsertSession implements InsertSession, InsertChannel {
    private enum State { OPEN, COMMITTED, ABORTED }

    private final StoreConnector connector;
    private final ChunkGeometry geo;
    private final ObjectPlan objects;
    /** The store's claim handle, reused for every object, when the store claims; else null. */
    private final StoreClaim claim;
    private final WordSum sum = new WordSum();
    private final Consumer<MemorySegment> releaseStaging;
    /** Put tasks whose put is done, reused by the next layer; guarded by {@link #pendingLock}. */
    private final ArrayDeque<PutTask> idleTasks = new ArrayDeque<>();
    private final KVLayout layout;
    private final int tokens;
    private final boolean[] layerPut;
    private boolean hiddenPut;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final Object pendingLock = new Object();
    private int pending;
    private State state = State.OPEN;

    StoreInsertSession(StoreConnector connector, ChunkGeometry geo) {
        this.connector = connector;
        this.geo = geo;
        this.objects = geo.objects;
        this.claim = connector.claims() ? connector.store().newClaim() : null;
        this.releaseStaging = connector.staging()::release;
        this.layout = connector.layout();
        this.tokens = geo.plan.totalTokens();
        this.layerPut = new boolean[layout.numLayers()];
    }

    @Override
    public int tokens() {
        return tokens;
    }

    @Override
    public void putLayer(int layer, LayerSource source) {
        checkLayer(layer);
        source.check(layout, tokens, "insert", connector.endpoint());
        source.insert(this, layer, 1);
    }

    @Override
    public void putLayers(LayerSource source) {
        for (int l = 0; l < layerPut.length; l++) {
            checkLayer(l);
        }
        source.check(layout, tokens, "insert", connector.endpoint());
        source.insert(this, 0, layerPut.length);
    }

    @Override
    public ChunkGeometry geometry() {
        return geo;
    }

    @Override
    public ConnectorResources resources() {
        return connector.resources();
    }

    @Override
    public MemorySegment acquireStaging(long bytes) {
        return acquire(bytes);
    }

    @Override
    public void releaseStaging(MemorySegment staging) {
        connector.staging().release(staging);
    }

    /**
     * Gathers straight into the store's memory when it claims ({@code CLAIM}), with the checksum fused into the gather;
     * when a claim finds the store full, the layer takes the staged path, whose put reports a store that stays full.
     */
    @Override
    public void putHost(int layer, HostLayerSource source) {
        long start = System.nanoTime();
        if (claim != null && putClaimed(layer, source, start)) {
            return;
        }
        MemorySegment staging = acquire(geo.layerStagingBytes);
        PutTask task = takeTask();
        try {
            for (int c = 0; c < geo.chunks.length; c++) {
                MemorySegment object = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
                gather(layer, c, source, object);
                task.values[c] = object;
            }
        } catch (RuntimeException e) {
            connector.staging().release(staging);
            recycle(task);
            throw e;
        }
        layerPut[layer] = true;
        submit(task, geo.layerKeys[layer], staging, releaseStaging, start, geo.layerBytes, true,
                connector.layerPutOptions());
    }

    /** Gathers chunk {@code c}'s tensors of {@code layer} into {@code object} and seals it, checksum fused if it can. */
    private void gather(int layer, int c, HostLayerSource source, MemorySegment object) {
        ChunkKeys ck = geo.chunks[c];
        if (objects.fusedChecksum()) {
            sum.reset();
            for (int t = 0; t < geo.tensors; t++) {
                source.gather(layer, t, ck.startToken(), ck.endToken(), object, geo.tensorPayloadOffset(c, t), sum);
            }
            objects.sealWithSum(c, layer, object, sum.value());
        } else {
            for (int t = 0; t < geo.tensors; t++) {
                source.gather(layer, t, ck.startToken(), ck.endToken(), object, geo.tensorPayloadOffset(c, t));
            }
            objects.seal(c, layer, object);
        }
    }

    /** Puts every chunk of {@code layer} through a claim; false when the store was full (nothing more claimed). */
    private boolean putClaimed(int layer, HostLayerSource source, long start) {
        KVStore store = connector.store();
        String[] keys = geo.layerKeys[layer];
        for (int c = 0; c < keys.length; c++) {
            int code = store.tryClaim(keys[c], geo.layerObjectBytes[c], connector.layerPutOptions(), claim);
            if (code == ClaimResult.FULL) {
                return false;
            }
            if (code != ClaimResult.CLAIMED) {
                throw usage(ErrorCode.INTERNAL, "claim of " + keys[c] + " answered " + ClaimResult.describe(code)
                        + " to a put that is not if-absent");
            }
            boolean committed = false;
            try {
                gather(layer, c, source, claim.segment());
                committed = claim.commit();
            } finally {
                if (!committed) {
                    claim.abort();
                }
            }
            layerPut[layer] = true;
        }
        connector.metricsRecorder().recordInsertLayer(System.nanoTime() - start, geo.layerBytes);
        return true;
    }

    @Override
    public void submitStaged(int layer, MemorySegment staging, long startNanos) {
        PutTask task = takeTask();
        for (int c = 0; c < geo.chunks.length; c++) {
            MemorySegment object = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
            objects.seal(c, layer, object);
            task.values[c] = object;
        }
        layerPut[layer] = true;
        submit(task, geo.layerKeys[layer], staging, releaseStaging, startNanos, geo.layerBytes, true,
                connector.layerPutOptions());
    }

    @Override
    public void submitDetached(int layer, MemorySegment[] objectSegments, MemorySegment lease,
                               Consumer<MemorySegment> releaseLease, long startNanos) {
        PutTask task = takeTask();
        System.arraycopy(objectSegments, 0, task.values, 0, geo.chunks.length);
        layerPut[layer] = true;
        submit(task, geo.layerKeys[layer], lease, releaseLease, startNanos, geo.layerBytes, true,
                connector.layerPutOptions());
    }

    @Override
    public void putHidden(Tensor hidden) {
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
        long rowBytes = layout.hiddenSize() * (long) s.dtype().byteWidth();
        int n = geo.chunks.length;
        long[] offsets = new long[n];
        long total = 0;
        for (int c = 0; c < n; c++) {
            offsets[c] = total;
            total += ChunkGeometry.align(objects.hiddenObjectBytes(c, s.dtype()));
        }
        long start = System.nanoTime();
        MemorySegment staging = acquire(total);
        String[] keys = new String[n];
        PutTask task = takeTask();
        long bytes = 0;
        for (int c = 0; c < n; c++) {
            ChunkKeys ck = geo.chunks[c];
            MemorySegment object = staging.asSlice(offsets[c], objects.hiddenObjectBytes(c, s.dtype()));
            MemorySegment.copy(hidden.segment(), ck.startToken() * rowBytes, object, objects.hiddenOffset(c),
                    ck.tokens() * rowBytes);
            objects.sealHidden(c, s.dtype(), object);
            keys[c] = objects.hiddenKey(c);
            task.values[c] = object;
            bytes += object.byteSize();
        }
        hiddenPut = true;
        submit(task, keys, staging, releaseStaging, start, bytes, false, connector.putOptions());
    }

    /** Puts {@code task}'s values under {@code keys} asynchronously, then gives {@code lease} to {@code release}. */
    private void submit(PutTask task, String[] keys, MemorySegment lease, Consumer<MemorySegment> release,
                        long startNanos, long bytes, boolean layerMetric, PutOptions options) {
        synchronized (pendingLock) {
            pending++;
        }
        task.keys = keys;
        task.lease = lease;
        task.release = release;
        task.stagedNanos = System.nanoTime() - startNanos;
        task.bytes = bytes;
        task.layerMetric = layerMetric;
        task.options = options;
        connector.executePut(task);
    }

    /** A put task from the session's pool, or a new one while fewer than the puts in flight exist. */
    private PutTask takeTask() {
        synchronized (pendingLock) {
            PutTask t = idleTasks.pollFirst();
            return t != null ? t : new PutTask(geo.chunks.length);
        }
    }

    private void recycle(PutTask task) {
        task.keys = null;
        task.lease = null;
        task.release = null;
        task.options = null;
        Arrays.fill(task.values, null);
        synchronized (pendingLock) {
            idleTasks.addFirst(task);
        }
    }

    /**
     * One asynchronous batch put of a layer's (or the hidden states') objects, with its value and result arrays;
     * reused through the session's pool, so that a steady insert allocates no task per layer.
     */
    private final class PutTask implements Runnable {
        final MemorySegment[] values;
        final boolean[] stored;
        String[] keys;
        MemorySegment lease;
        Consumer<MemorySegment> release;
        long stagedNanos;
        long bytes;
        boolean layerMetric;
        PutOptions options;

        PutTask(int chunks) {
            this.values = new MemorySegment[chunks];
            this.stored = new boolean[chunks];
        }

        @Override
        public void run() {
            try {
                long putStart = System.nanoTime();
                connector.store().putBatch(keys, values, keys.length, options, stored);
                if (layerMetric) {
                    // Staging plus the store's put; time queued behind earlier layers is not the layer's transfer.
                    connector.metricsRecorder().recordInsertLayer(stagedNanos + System.nanoTime() - putStart, bytes);
                }
            } catch (Throwable t) {
                if (failure.compareAndSet(null, t)) {
                    connector.onIoError("layer put (the insert aborts at commit) to", t);
                }
            } finally {
                release.accept(lease);
                recycle(this);
                synchronized (pendingLock) {
                    pending--;
                    pendingLock.notifyAll();
                }
            }
        }
    }

    /**
     * Pooled staging; a full pool is back-pressure, a null from {@code tryAcquire} rather than an exception: wait
     * for this insert's puts to give theirs back, then lease or report {@code STORE_FULL}.
     */
    private MemorySegment acquire(long bytes) {
        MemorySegment s = connector.staging().tryAcquire(bytes);
        if (s != null) {
            return s;
        }
        awaitPending();
        return connector.staging().acquire(bytes);
    }

    private void awaitPending() {
        synchronized (pendingLock) {
            while (pending > 0) {
                try {
                    pendingLock.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw KVException.of(ErrorCode.INTERNAL, "interrupted while waiting for layer puts")
                            .operation("insert").cause(e).build();
                }
            }
        }
    }

    /** {@inheritDoc} The manifests, written last, make the entry visible. */
    @Override
    public void commit() {
        checkOpen("commit");
        awaitPending();
        Throwable f = failure.get();
        if (f != null) {
            abort();
            throw f instanceof KVException ke ? ke : KVException.of(ErrorCode.INTERNAL, "a layer put failed: " + f)
                    .store(connector.store().uri()).operation("commit").cause(f).build();
        }
        for (int l = 0; l < layerPut.length; l++) {
            if (!layerPut[l]) {
                abort();
                throw usage(ErrorCode.INVALID_ARGUMENT, "layer " + l + " of " + layerPut.length
                        + " was never put; the insert was aborted");
            }
        }
        int n = geo.chunks.length;
        MemorySegment staging = acquire(n * ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES));
        try {
            String[] keys = new String[n];
            MemorySegment[] values = new MemorySegment[n];
            for (int c = 0; c < n; c++) {
                MemorySegment m = staging.asSlice(c * ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES),
                        ChunkGeometry.MANIFEST_BYTES);
                long base = RawTensorFormat.HEADER_BYTES;
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base, geo.chunks[c].startToken());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 8, geo.chunks[c].endToken());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 16, layout.numLayers());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 24, hiddenPut ? ChunkGeometry.FLAG_HIDDEN : 0);
                RawTensorFormat.writeHeader(m, ChunkGeometry.MANIFEST_SPEC, geo.chunks[c].tokens(),
                        layout.fingerprint(), true);
                keys[c] = geo.chunks[c].manifestKey();
                values[c] = m;
            }
            connector.store().putBatch(keys, values, n, connector.putOptions(), new boolean[n]);
        } catch (RuntimeException e) {
            abort();
            throw e;
        } finally {
            connector.staging().release(staging);
        }
        state = State.COMMITTED;
        connector.metricsRecorder().recordCommit();
        connector.emitStored(geo, n);
    }

    @Override
    public void abort() {
        if (state != State.OPEN) {
            return;
        }
        state = State.ABORTED;
        awaitPending();
        int n = geo.chunks.length;
        String[] keys = new String[n * (layerPut.length + 2)];
        int k = 0;
        for (ChunkKeys ck : geo.chunks) {
            keys[k++] = ck.manifestKey();
            keys[k++] = ck.hiddenKey();
            for (int l = 0; l < layerPut.length; l++) {
                if (layerPut[l]) {
                    keys[k++] = objects.layerKey(ck.index(), l);
                }
            }
        }
        connector.removeOrKeep(keys, k, "abort", false);
        connector.metricsRecorder().recordAbort();
    }

    @Override
    public void close() {
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
        Throwable f = failure.get();
        if (f != null) {
            throw f instanceof KVException ke ? ke : KVException.of(ErrorCode.INTERNAL, "an earlier layer put failed")
                    .cause(f).build();
        }
    }

    private void checkOpen(String op) {
        if (state != State.OPEN) {
            throw KVException.of(ErrorCode.CLOSED, "the insert was already " + state.name().toLowerCase(java.util.Locale.ROOT))
                    .operation(op).build();
        }
    }

    private KVException usage(ErrorCode code, String detail) {
        return KVException.of(code, detail).store(connector.store().uri()).operation("insert").build();
    }
}
