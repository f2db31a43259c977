package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.memory.WordSum;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.function.Consumer;

/**
 * The {@link InsertSession} of a {@link StoreConnector}: each layer is copied into pooled staging before
 * {@code putLayer} returns, sealed by the codec and put on the connector's I/O threads, overlapping the next layer's
 * compute; {@link #commit()} writes the manifests, last. It is also the {@link InsertChannel} through which sources
 * that move layers themselves (device caches) hand them on. The checks and the state it shares with the chunk-object
 * insert are in {@link StoreInsertBase}.
 */
final class StoreInsertSession extends StoreInsertBase {
    /** The store's claim handle, reused for every object, when the store claims; else null. */
    private StoreClaim claim;
    private final WordSum sum = new WordSum();
    private final Consumer<MemorySegment> releaseStaging;
    /** Put tasks whose put is done, reused by the next layer. */
    private final ArrayDeque<PutTask> idleTasks = new ArrayDeque<>(4);

    StoreInsertSession(StoreConnector connector, ChunkGeometry geo) {
        super(connector, geo, "layer put");
        this.claim = connector.claims() ? scratch.claim(connector.store()) : null;
        this.releaseStaging = connector.staging()::release;
    }

    /** {@inheritDoc} Keeps its idle put tasks while the chunk count stays the same. */
    @Override
    void restart(ChunkGeometry geometry) {
        if (geometry.chunks.length != geo.chunks.length) {
            synchronized (idleTasks) {
                idleTasks.clear();
            }
        }
        super.restart(geometry);
        claim = connector.claims() ? scratch.claim(connector.store()) : null;
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
        MemorySegment staging = pending.acquire(geo.layerStagingBytes);
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
        geo.layerKeys(layer, task.keys, geo.chunks.length);
        submit(task, staging, releaseStaging, start, geo.layerBytes, true, connector.layerPutOptions());
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
        StoreKey[] keys = scratch.keys;
        geo.layerKeys(layer, keys, geo.chunks.length);
        for (int c = 0; c < geo.chunks.length; c++) {
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
        geo.layerKeys(layer, task.keys, geo.chunks.length);
        submit(task, staging, releaseStaging, startNanos, geo.layerBytes, true, connector.layerPutOptions());
    }

    @Override
    public void submitDetached(int layer, MemorySegment[] objectSegments, MemorySegment lease,
                               Consumer<MemorySegment> releaseLease, long startNanos) {
        PutTask task = takeTask();
        System.arraycopy(objectSegments, 0, task.values, 0, geo.chunks.length);
        layerPut[layer] = true;
        geo.layerKeys(layer, task.keys, geo.chunks.length);
        submit(task, lease, releaseLease, startNanos, geo.layerBytes, true, connector.layerPutOptions());
    }

    @Override
    public void putHidden(Tensor hidden) {
        checkHidden(hidden);
        DType dtype = hidden.spec().dtype();
        long rowBytes = layout.hiddenSize() * (long) dtype.byteWidth();
        int n = geo.chunks.length;
        long[] offsets = hiddenOffsets(hidden);
        long start = System.nanoTime();
        MemorySegment staging = pending.acquire(offsets[n]);
        PutTask task = takeTask();
        long bytes = 0;
        for (int c = 0; c < n; c++) {
            ChunkKeys ck = geo.chunks[c];
            MemorySegment object = staging.asSlice(offsets[c], objects.hiddenObjectBytes(c, dtype));
            MemorySegment.copy(hidden.segment(), ck.startToken() * rowBytes, object, objects.hiddenOffset(c),
                    ck.tokens() * rowBytes);
            objects.sealHidden(c, dtype, object);
            objects.hiddenKey(c, task.keys[c]);
            task.values[c] = object;
            bytes += object.byteSize();
        }
        hiddenPut = true;
        submit(task, staging, releaseStaging, start, bytes, false, connector.putOptions());
    }

    /** Puts {@code task}'s values under its keys asynchronously, then gives {@code lease} to {@code release}. */
    private void submit(PutTask task, MemorySegment lease, Consumer<MemorySegment> release, long startNanos, long bytes,
                        boolean layerMetric, PutOptions options) {
        pending.begin();
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
        synchronized (idleTasks) {
            PutTask t = idleTasks.pollFirst();
            return t != null ? t : new PutTask(geo.chunks.length);
        }
    }

    private void recycle(PutTask task) {
        task.lease = null;
        task.release = null;
        task.options = null;
        Arrays.fill(task.values, null);
        synchronized (idleTasks) {
            idleTasks.addFirst(task);
        }
    }

    /**
     * One asynchronous batch put of a layer's (or the hidden states') objects, with its value and result arrays;
     * reused through the session's pool, so that a steady insert allocates no task per layer.
     */
    private final class PutTask implements Runnable {
        final StoreKey[] keys;
        final MemorySegment[] values;
        final boolean[] stored;
        MemorySegment lease;
        Consumer<MemorySegment> release;
        long stagedNanos;
        long bytes;
        boolean layerMetric;
        PutOptions options;

        PutTask(int chunks) {
            this.keys = RequestScratch.newKeys(chunks);
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
                pending.failed(t);
            } finally {
                release.accept(lease);
                recycle(this);
                pending.done();
            }
        }
    }

    /** {@inheritDoc} The manifests, written last, make the entry visible. */
    @Override
    public void commit() {
        beginCommit();
        int n = geo.chunks.length;
        MemorySegment staging = pending.acquire(n * ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES));
        try {
            StoreKey[] keys = scratch.keys;
            MemorySegment[] values = scratch.manifestsIn(staging, n);
            for (int c = 0; c < n; c++) {
                MemorySegment m = values[c];
                long base = RawTensorFormat.HEADER_BYTES;
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base, geo.chunks[c].startToken());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 8, geo.chunks[c].endToken());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 16, layout.numLayers());
                m.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 24, hiddenPut ? ChunkGeometry.FLAG_HIDDEN : 0);
                RawTensorFormat.writeHeader(m, ChunkGeometry.MANIFEST_SPEC, geo.chunks[c].tokens(),
                        layout.fingerprint(), true);
                geo.chunks[c].manifestKey(keys[c]);
            }
            connector.store().putBatch(keys, values, n, connector.putOptions(), scratch.stored);
        } catch (RuntimeException e) {
            abort();
            throw e;
        } finally {
            connector.staging().release(staging);
        }
        committed(n);
    }

    @Override
    void removeWritten() {
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
        connector.removeOrKeep(keys, k);
    }
}
