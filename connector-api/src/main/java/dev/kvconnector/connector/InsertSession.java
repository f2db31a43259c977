package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.cuda.LayerStagingPipeline;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One request's insert, written layer by layer: begin, put every layer (and optionally the hidden states), then
 * commit or abort. Reads like a claim/commit/abort ring-buffer protocol:
 *
 * <pre>{@code
 * try (InsertSession insert = connector.beginInsert(RequestTokens.of(prompt))) {
 *     for (int layer = 0; layer < layers; layer++) {
 *         engine.computeLayer(layer);
 *         insert.putLayer(layer, cache, blockTable);   // gathered now, stored asynchronously
 *     }
 *     insert.putHidden(hiddenStates);
 *     insert.commit();                                  // waits for the puts, then makes the entry visible
 * }                                                     // close() aborts an uncommitted insert
 * }</pre>
 *
 * <p>Each {@code putLayer} copies the layer's tokens into pooled staging memory before it returns, so the engine may
 * overwrite its own buffers right away; the store puts run on the connector's I/O threads and overlap the next
 * layer's compute. Nothing is visible to consumers until {@link #commit()} writes the manifests, last. Abort
 * removes whatever was written. Not thread-safe: one thread drives one session.
 */
public final class InsertSession implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(InsertSession.class);
    private enum State { OPEN, COMMITTED, ABORTED }

    private final KVStoreConnector connector;
    private final ChunkGeometry geo;
    private final KVLayout layout;
    private final int tokens;
    private final boolean[] layerPut;
    private boolean hiddenPut;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final Object pendingLock = new Object();
    private int pending;
    private State state = State.OPEN;

    InsertSession(KVStoreConnector connector, ChunkGeometry geo) {
        this.connector = connector;
        this.geo = geo;
        this.layout = connector.layout();
        this.tokens = geo.plan.totalTokens();
        this.layerPut = new boolean[layout.numLayers()];
    }

    /** Prompt tokens this insert covers. */
    public int tokens() {
        return tokens;
    }

    /**
     * Puts one layer from contiguous tensors: K and V (MHA) or the latent (MLA), each {@code [T, kvHeads, headSize]}
     * in the layout's dtype, where T is the request's token count.
     */
    public void putLayer(int layer, Tensor... layerTensors) {
        checkLayer(layer);
        if (layerTensors.length != geo.tensors) {
            throw usage(ErrorCode.SHAPE_MISMATCH, layerTensors.length + " tensors given for layer " + layer + ", the "
                    + layout.kind() + " layout needs " + geo.tensors);
        }
        TensorSpec want = TensorSpec.of(layout.dtype(), tokens, layout.kvHeads(), layout.headSize());
        for (Tensor t : layerTensors) {
            t.requireHostAccessible("putLayer");
            if (t.spec().dtype() != layout.dtype()) {
                throw usage(ErrorCode.DTYPE_MISMATCH, "layer " + layer + " tensor is " + t.spec().dtype() + ", the layout "
                        + "stores " + layout.dtype());
            }
            if (!t.spec().equals(want)) {
                throw usage(ErrorCode.SHAPE_MISMATCH, "layer " + layer + " tensor is " + t.spec() + ", expected " + want);
            }
        }
        long start = System.nanoTime();
        MemorySegment staging = acquire(geo.layerStagingBytes);
        try {
            for (int c = 0; c < geo.chunks.length; c++) {
                ChunkKeys ck = geo.chunks[c];
                long objectOffset = geo.layerOffsets[c];
                for (int t = 0; t < geo.tensors; t++) {
                    MemorySegment.copy(layerTensors[t].segment(), ck.startToken() * geo.tokenBytes, staging,
                            objectOffset + geo.tensorPayloadOffset(c, t), (long) ck.tokens() * geo.tokenBytes);
                }
            }
        } catch (RuntimeException e) {
            connector.staging().release(staging);
            throw e;
        }
        submitLayer(layer, staging, start);
    }

    /** Puts one layer gathered from a paged cache through the request's slots (a block table or slot mapping). */
    public void putLayer(int layer, PagedKVCache cache, TokenSlots slots) {
        checkLayer(layer);
        if (!cache.layout().canonicalString().equals(layout.canonicalString())) {
            throw usage(ErrorCode.SHAPE_MISMATCH, "paged cache layout " + cache.layout().canonicalString()
                    + " differs from the connector's " + layout.canonicalString());
        }
        if (slots.tokens() < tokens) {
            throw usage(ErrorCode.SHAPE_MISMATCH, "slots cover " + slots.tokens() + " tokens, the request has " + tokens);
        }
        long start = System.nanoTime();
        MemorySegment staging = acquire(geo.layerStagingBytes);
        try {
            for (int c = 0; c < geo.chunks.length; c++) {
                ChunkKeys ck = geo.chunks[c];
                for (int t = 0; t < geo.tensors; t++) {
                    cache.gather(layer, t, slots, ck.startToken(), ck.endToken(), staging,
                            geo.layerOffsets[c] + geo.tensorPayloadOffset(c, t));
                }
            }
        } catch (RuntimeException e) {
            connector.staging().release(staging);
            throw e;
        }
        submitLayer(layer, staging, start);
    }

    /**
     * Puts one layer from a paged cache in GPU memory: K and V (or the latent) are gathered on the GPU by the paged-KV
     * kernel and copied into pooled pinned staging before this returns (so the engine may reuse its blocks), then put
     * on the connector's I/O threads like a host layer; with a {@code DEVICE_MEMORY} store they are put straight from
     * a registered device buffer instead. The layer must be complete on the device when this is called (the engine
     * has synchronized the stream that wrote it).
     *
     * @throws KVException {@code UNSUPPORTED_MEMORY} or another code naming what is missing when this machine has no
     *     CUDA driver, no device or no kernels
     */
    public void putLayer(int layer, DevicePagedKVCache cache, TokenSlots slots) {
        putDevice(layer, 1, cache, slots);
    }

    /**
     * Puts every layer from a paged cache in GPU memory, for an engine that inserts after its whole forward pass:
     * through {@link LayerStagingPipeline}, so the gather and device-to-host copy of layer {@code i + 1} run while
     * layer {@code i} is being put. Otherwise as {@link #putLayer(int, DevicePagedKVCache, TokenSlots)}.
     */
    public void putLayers(DevicePagedKVCache cache, TokenSlots slots) {
        putDevice(0, layout.numLayers(), cache, slots);
    }

    private void putDevice(int first, int count, DevicePagedKVCache cache, TokenSlots slots) {
        for (int l = first; l < first + count; l++) {
            checkLayer(l);
        }
        if (!cache.layout().canonicalString().equals(layout.canonicalString())) {
            throw usage(ErrorCode.SHAPE_MISMATCH, "device paged cache layout " + cache.layout().canonicalString()
                    + " differs from the connector's " + layout.canonicalString());
        }
        if (slots.tokens() < tokens) {
            throw usage(ErrorCode.SHAPE_MISMATCH, "slots cover " + slots.tokens() + " tokens, the request has " + tokens);
        }
        try (DeviceTransfer device = new DeviceTransfer(connector, geo, cache, slots, "putLayer")) {
            LayerStagingPipeline.run(count, device.insertStages(this, first));
        }
    }

    void submitLayer(int layer, MemorySegment staging, long startNanos) {
        int n = geo.chunks.length;
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        long bytes = 0;
        for (int c = 0; c < n; c++) {
            MemorySegment object = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes(c));
            RawTensorFormat.writeHeader(object, geo.layerSpecs[c], geo.chunks[c].tokens(), connector.fingerprint(),
                    connector.checksums());
            keys[c] = geo.chunks[c].layerKeys()[layer];
            values[c] = object;
            bytes += object.byteSize();
        }
        layerPut[layer] = true;
        submit(keys, values, staging, false, startNanos, bytes, true);
    }

    /**
     * Puts a layer whose objects, headers included, are ready in {@code objects}: one per chunk, slices of
     * {@code deviceLease}, a device staging buffer given to a {@code DEVICE_MEMORY} store and released once the put
     * is done.
     */
    void submitDeviceLayer(int layer, MemorySegment[] objects, MemorySegment deviceLease, long startNanos) {
        int n = geo.chunks.length;
        String[] keys = new String[n];
        long bytes = 0;
        for (int c = 0; c < n; c++) {
            keys[c] = geo.chunks[c].layerKeys()[layer];
            bytes += objects[c].byteSize();
        }
        layerPut[layer] = true;
        submit(keys, objects, deviceLease, true, startNanos, bytes, true);
    }

    /** Puts the hidden states {@code [T, hiddenSize]} (any dtype); the consumer samples its first token from them. */
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
        TensorSpec[] specs = new TensorSpec[n];
        long total = 0;
        for (int c = 0; c < n; c++) {
            specs[c] = TensorSpec.of(s.dtype(), geo.chunks[c].tokens(), layout.hiddenSize());
            offsets[c] = total;
            total += ChunkGeometry.align(RawTensorFormat.encodedSize(specs[c]));
        }
        long start = System.nanoTime();
        MemorySegment staging = acquire(total);
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        long bytes = 0;
        for (int c = 0; c < n; c++) {
            ChunkKeys ck = geo.chunks[c];
            MemorySegment object = staging.asSlice(offsets[c], RawTensorFormat.encodedSize(specs[c]));
            MemorySegment.copy(hidden.segment(), ck.startToken() * rowBytes, object, RawTensorFormat.HEADER_BYTES,
                    ck.tokens() * rowBytes);
            RawTensorFormat.writeHeader(object, specs[c], ck.tokens(), connector.fingerprint(), connector.checksums());
            keys[c] = ck.hiddenKey();
            values[c] = object;
            bytes += object.byteSize();
        }
        hiddenPut = true;
        submit(keys, values, staging, false, start, bytes, false);
    }

    /** Puts asynchronously, then gives {@code lease} back: to the device staging pool, or to the host one. */
    private void submit(String[] keys, MemorySegment[] values, MemorySegment lease, boolean deviceLease,
                        long startNanos, long bytes, boolean layerMetric) {
        synchronized (pendingLock) {
            pending++;
        }
        long stagedNanos = System.nanoTime() - startNanos;
        connector.executePut(() -> {
            try {
                long putStart = System.nanoTime();
                boolean[] stored = new boolean[keys.length];
                connector.store().putBatch(keys, values, keys.length, connector.putOptions(), stored);
                if (layerMetric) {
                    // Staging plus the store's put; time queued behind earlier layers is not the layer's transfer.
                    connector.metricsRecorder().recordInsertLayer(stagedNanos + System.nanoTime() - putStart, bytes);
                }
            } catch (Throwable t) {
                if (failure.compareAndSet(null, t)) {
                    LOG.warn("layer put to {} failed; the insert will abort at commit: {}", connector.store().uri(),
                            t.toString());
                }
            } finally {
                if (deviceLease) {
                    connector.releaseDeviceStaging(lease);
                } else {
                    connector.staging().release(lease);
                }
                synchronized (pendingLock) {
                    pending--;
                    pendingLock.notifyAll();
                }
            }
        });
    }

    MemorySegment acquire(long bytes) {
        try {
            return connector.staging().acquire(bytes);
        } catch (KVException e) {
            if (e.code() != ErrorCode.STORE_FULL) {
                throw e;
            }
            awaitPending();
            return connector.staging().acquire(bytes);
        }
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

    /**
     * Waits for every put, then writes the manifests that make the entry visible. When any put failed, or a layer
     * was never put, the insert is aborted and the failure thrown.
     */
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
                        connector.fingerprint(), true);
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
    }

    /** Removes every object written so far. Idempotent; does nothing after a commit. */
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
                    keys[k++] = ck.layerKeys()[l];
                }
            }
        }
        connector.removeOrKeep(keys, k, "abort", false);
        connector.metricsRecorder().recordAbort();
    }

    /** Aborts unless committed. */
    @Override
    public void close() {
        abort();
    }

    void checkLayer(int layer) {
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
