package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One request's drop-select. In whole-request mode ({@link KVStoreConnector#dropSelect}) it reads only a committed
 * entry. In layer-wise mode ({@link KVStoreConnector#beginDropSelect}) it starts before the producer commits: layer
 * {@code i} is loaded as soon as the producer has stored it, while the engine waits in {@link #awaitLayer(int)}
 * just before it needs that layer; the hidden states and the commit are awaited last.
 *
 * <pre>{@code
 * try (DropSession drop = connector.beginDropSelect(request, DropTarget.paged(cache, blockTable).withHidden(h))) {
 *     for (int layer = 0; layer < layers; layer++) {
 *         if (!drop.awaitLayer(layer)) break;       // a miss: drop.result() says why; recompute
 *         engine.useLayer(layer);
 *     }
 *     DropResult r = drop.result();
 * }
 * }</pre>
 */
public final class DropSession implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DropSession.class);
    private static final long MIN_BACKOFF_NANOS = 10_000;
    private static final long MAX_BACKOFF_NANOS = 1_000_000;

    private final KVStoreConnector connector;
    private final KVStore store;
    private final ChunkGeometry geo;
    private final DropTarget target;
    private final DropMode mode;
    private final boolean streaming;
    private final long deadlineNanos;
    private final int requestedTokens;
    private final long[] manifestFlags;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition progress = lock.newCondition();
    private int layersLoaded;
    private DropResult result;
    private Throwable failure;
    private boolean done;
    /** The device work of a {@link DropTarget#device} target while {@link #load()} runs, else null. */
    private DeviceTransfer device;
    /** Time the layer being read spent polling for objects the producer had not stored yet, in ns. */
    private long waitedNanos;

    DropSession(KVStoreConnector connector, ChunkGeometry geo, DropTarget target, DropMode mode, boolean streaming,
                long timeoutNanos, int requestedTokens) {
        this.connector = connector;
        this.store = connector.store();
        this.geo = geo;
        this.target = target;
        this.mode = mode;
        this.streaming = streaming;
        this.deadlineNanos = System.nanoTime() + timeoutNanos;
        this.requestedTokens = requestedTokens;
        this.manifestFlags = new long[geo.chunks.length];
    }

    /** Runs the load; a failure (not a miss) is kept and rethrown to whoever waits. */
    void run() {
        DropResult r = null;
        Throwable f = null;
        try {
            r = load();
        } catch (Throwable t) {
            f = t;
        }
        lock.lock();
        try {
            result = r;
            failure = f;
            done = true;
            progress.signalAll();
        } finally {
            lock.unlock();
        }
        if (r != null) {
            connector.metricsRecorder().recordResult(r);
            if (!r.isHit()) {
                LOG.debug("drop-select missed on {}: {} ({})", store.uri(), r.reason(), r.detail());
            }
        } else {
            LOG.warn("drop-select failed on {}: {}", store.uri(), f.toString());
        }
    }

    private DropResult load() {
        if (target.deviceCache() == null) {
            return loadLayers();
        }
        try (DeviceTransfer d = new DeviceTransfer(connector, geo, target.deviceCache(), target.slots(),
                "dropSelect")) {
            device = d;
            return loadLayers();
        } finally {
            device = null;
        }
    }

    private DropResult loadLayers() {
        int chunks = geo.chunks.length;
        if (chunks == 0) {
            return DropResult.miss(requestedTokens, MissReason.ABSENT, "the key scheme planned no chunks");
        }
        if (!streaming) {
            DropResult bad = readManifests(chunks, false);
            if (bad != null) {
                return bad;
            }
            chunks = committedChunks;
            if (chunks == 0) {
                return DropResult.miss(requestedTokens, MissReason.ABSENT, "no committed entry for "
                        + geo.chunks[0].manifestKey());
            }
        }
        for (int layer = 0; layer < connector.layout().numLayers(); layer++) {
            DropResult miss = readLayer(layer, chunks);
            if (miss != null) {
                return miss;
            }
            lock.lock();
            try {
                layersLoaded = layer + 1;
                progress.signalAll();
            } finally {
                lock.unlock();
            }
        }
        if (streaming) {
            DropResult bad = readManifests(chunks, true);
            if (bad != null) {
                return bad;
            }
        }
        if (target.hidden() != null) {
            DropResult miss = readHidden(chunks);
            if (miss != null) {
                return miss;
            }
        }
        if (mode == DropMode.CONSUME) {
            consume(chunks);
        }
        return DropResult.hit(geo.chunks[chunks - 1].endToken(), requestedTokens);
    }

    private int committedChunks;

    /** Reads manifests in order; without waiting, stops at the first absent one (the longest committed prefix). */
    private DropResult readManifests(int chunks, boolean wait) {
        long slot = ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES);
        MemorySegment staging = connector.staging().acquire(slot);
        try {
            MemorySegment m = staging.asSlice(0, ChunkGeometry.MANIFEST_BYTES);
            int c = 0;
            for (; c < chunks; c++) {
                String key = geo.chunks[c].manifestKey();
                long r = wait ? getWaiting(key, m) : store.getInto(key, m);
                if (GetResult.isMiss(r)) {
                    if (wait) {
                        return DropResult.miss(requestedTokens, MissReason.TIMED_OUT, "the producer did not commit "
                                + key + " within " + connector.layerTimeoutMillis() + " ms");
                    }
                    break;
                }
                if (GetResult.isTooSmall(r)) {
                    return DropResult.miss(requestedTokens, MissReason.CORRUPT, "manifest " + key + " is "
                            + GetResult.requiredSize(r) + " bytes, expected " + ChunkGeometry.MANIFEST_BYTES);
                }
                int status = RawTensorFormat.validate(m, r, ChunkGeometry.MANIFEST_SPEC, connector.fingerprint());
                if (status != RawTensorFormat.OK) {
                    return statusMiss(status, key);
                }
                long base = RawTensorFormat.HEADER_BYTES;
                ChunkKeys ck = geo.chunks[c];
                if (m.get(ValueLayout.JAVA_LONG_UNALIGNED, base) != ck.startToken()
                        || m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 8) != ck.endToken()
                        || m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 16) != connector.layout().numLayers()) {
                    return DropResult.miss(requestedTokens, MissReason.LAYOUT_MISMATCH, "manifest " + key
                            + " describes another chunk or layer count");
                }
                manifestFlags[c] = m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 24);
            }
            committedChunks = c;
            return null;
        } finally {
            connector.staging().release(staging);
        }
    }

    private DropResult readLayer(int layer, int chunks) {
        if (device != null && device.direct()) {
            return readLayerIntoDevice(layer, chunks);
        }
        long start = System.nanoTime();
        waitedNanos = 0;
        MemorySegment staging = connector.staging().acquire(geo.layerStagingBytes);
        try {
            String[] keys = new String[chunks];
            MemorySegment[] dsts = new MemorySegment[chunks];
            long[] results = new long[chunks];
            long bytes = 0;
            for (int c = 0; c < chunks; c++) {
                keys[c] = geo.chunks[c].layerKeys()[layer];
                dsts[c] = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes(c));
            }
            store.getIntoBatch(keys, dsts, chunks, results);
            for (int c = 0; c < chunks; c++) {
                long r = results[c];
                if (GetResult.isMiss(r) && streaming) {
                    r = getWaiting(keys[c], dsts[c]);
                }
                DropResult miss = check(r, keys[c], dsts[c], geo.layerSpecs[c], "layer " + layer);
                if (miss != null) {
                    return miss;
                }
                bytes += r;
                if (device == null) {
                    for (int t = 0; t < geo.tensors; t++) {
                        target.write(layer, t, dsts[c], geo.tensorPayloadOffset(c, t), geo.chunks[c].startToken(),
                                geo.chunks[c].endToken(), geo.tokenBytes);
                    }
                }
            }
            if (device != null) {
                device.scatterFromHost(layer, staging, chunks);
            }
            recordLayer(start, bytes);
            return null;
        } finally {
            connector.staging().release(staging);
        }
    }

    /**
     * A layer for a device target from a {@code DEVICE_MEMORY} store: read straight into a registered device buffer
     * (GPUDirect), headers copied back to check them (the payload CRC cannot be checked without the payload on the
     * host), then scattered on the GPU.
     */
    private DropResult readLayerIntoDevice(int layer, int chunks) {
        long start = System.nanoTime();
        waitedNanos = 0;
        MemorySegment deviceLayer = device.acquireLayer();
        MemorySegment headers = null;
        try {
            String[] keys = new String[chunks];
            MemorySegment[] dsts = new MemorySegment[chunks];
            long[] results = new long[chunks];
            for (int c = 0; c < chunks; c++) {
                keys[c] = geo.chunks[c].layerKeys()[layer];
                dsts[c] = device.object(deviceLayer, c);
            }
            store.getIntoBatch(keys, dsts, chunks, results);
            if (streaming) {
                for (int c = 0; c < chunks; c++) {
                    if (GetResult.isMiss(results[c])) {
                        results[c] = getWaiting(keys[c], dsts[c]);
                    }
                }
            }
            headers = connector.staging().acquire((long) chunks * RawTensorFormat.HEADER_BYTES);
            device.copyHeaders(deviceLayer, headers, chunks);
            long bytes = 0;
            for (int c = 0; c < chunks; c++) {
                MemorySegment header = headers.asSlice((long) c * RawTensorFormat.HEADER_BYTES,
                        RawTensorFormat.HEADER_BYTES);
                DropResult miss = checkDetached(results[c], keys[c], header, dsts[c].byteSize(), geo.layerSpecs[c],
                        "layer " + layer);
                if (miss != null) {
                    return miss;
                }
                bytes += results[c];
            }
            device.scatterFromDevice(layer, deviceLayer, chunks);
            recordLayer(start, bytes);
            return null;
        } finally {
            if (headers != null) {
                connector.staging().release(headers);
            }
            device.release(deviceLayer);
        }
    }

    private DropResult readHidden(int chunks) {
        Tensor hidden = target.hidden();
        TensorSpec hs = hidden.spec();
        int hiddenSize = connector.layout().hiddenSize();
        if (hs.rank() != 2 || hs.dim(1) != hiddenSize || hs.dim(0) < geo.chunks[chunks - 1].endToken()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "hidden target " + hs + " cannot hold "
                    + geo.chunks[chunks - 1].endToken() + " x " + hiddenSize).operation("dropSelect").build();
        }
        long rowBytes = (long) hiddenSize * hs.dtype().byteWidth();
        for (int c = 0; c < chunks; c++) {
            if ((manifestFlags[c] & ChunkGeometry.FLAG_HIDDEN) == 0) {
                return DropResult.miss(requestedTokens, MissReason.ABSENT, "the producer stored no hidden states for "
                        + geo.chunks[c].hiddenKey());
            }
            TensorSpec spec = TensorSpec.of(hs.dtype(), geo.chunks[c].tokens(), hiddenSize);
            long size = RawTensorFormat.encodedSize(spec);
            MemorySegment staging = connector.staging().acquire(size);
            try {
                MemorySegment object = staging.asSlice(0, size);
                long r = store.getInto(geo.chunks[c].hiddenKey(), object);
                DropResult miss = check(r, geo.chunks[c].hiddenKey(), object, spec, "hidden states");
                if (miss != null) {
                    return miss;
                }
                MemorySegment.copy(object, RawTensorFormat.HEADER_BYTES, hidden.segment(),
                        geo.chunks[c].startToken() * rowBytes, geo.chunks[c].tokens() * rowBytes);
            } finally {
                connector.staging().release(staging);
            }
        }
        return null;
    }

    private DropResult check(long r, String key, MemorySegment object, TensorSpec spec, String what) {
        DropResult miss = missOrTooSmall(r, key, object.byteSize(), what);
        if (miss != null) {
            return miss;
        }
        int status = RawTensorFormat.validate(object, r, spec, connector.fingerprint());
        return status == RawTensorFormat.OK ? null : statusMiss(status, key);
    }

    private DropResult missOrTooSmall(long r, String key, long capacity, String what) {
        if (GetResult.isMiss(r)) {
            return DropResult.miss(requestedTokens, streaming ? MissReason.TIMED_OUT : MissReason.ABSENT,
                    what + " object " + key + (streaming ? " did not arrive within " + connector.layerTimeoutMillis()
                            + " ms" : " is gone (evicted or removed) although its manifest exists"));
        }
        if (GetResult.isTooSmall(r)) {
            return DropResult.miss(requestedTokens, MissReason.LAYOUT_MISMATCH, what + " object " + key + " is "
                    + GetResult.requiredSize(r) + " bytes, the layout expects " + capacity);
        }
        return null;
    }

    /** {@link #check} for an object whose payload is in device memory: {@code header} is a host copy of its header. */
    private DropResult checkDetached(long r, String key, MemorySegment header, long capacity, TensorSpec spec,
                                     String what) {
        DropResult miss = missOrTooSmall(r, key, capacity, what);
        if (miss != null) {
            return miss;
        }
        int status = RawTensorFormat.validateHeader(header, r, spec, connector.fingerprint());
        return status == RawTensorFormat.OK ? null : statusMiss(status, key);
    }

    /** The layer's copy time without its wait for the producer, and (layer-wise) the wait apart. */
    private void recordLayer(long startNanos, long bytes) {
        connector.metricsRecorder().recordDropLayer(System.nanoTime() - startNanos - waitedNanos, bytes);
        if (streaming) {
            connector.metricsRecorder().recordDropWait(waitedNanos);
        }
    }

    private DropResult statusMiss(int status, String key) {
        return DropResult.miss(requestedTokens, RawTensorFormat.isLayoutMismatch(status) ? MissReason.LAYOUT_MISMATCH
                : MissReason.CORRUPT, "object " + key + ": " + RawTensorFormat.describe(status));
    }

    /**
     * Polls until the key appears or the deadline passes, backing off from 10 us to 1 ms; adds the time until the
     * last poll began to {@link #waitedNanos}.
     */
    private long getWaiting(String key, MemorySegment dst) {
        long backoff = MIN_BACKOFF_NANOS;
        long first = System.nanoTime();
        while (true) {
            long poll = System.nanoTime();
            long r = store.getInto(key, dst);
            if (!GetResult.isMiss(r) || System.nanoTime() - deadlineNanos >= 0) {
                // The last get is the copy itself; the polls and sleeps before it were the wait.
                waitedNanos += poll - first;
                return r;
            }
            LockSupport.parkNanos(backoff);
            backoff = Math.min(MAX_BACKOFF_NANOS, backoff * 2);
        }
    }

    private void consume(int chunks) {
        int layers = connector.layout().numLayers();
        String[] keys = new String[chunks * (layers + 2)];
        int k = 0;
        for (int c = 0; c < chunks; c++) {
            keys[k++] = geo.chunks[c].manifestKey();
        }
        for (int c = 0; c < chunks; c++) {
            keys[k++] = geo.chunks[c].hiddenKey();
            for (int l = 0; l < layers; l++) {
                keys[k++] = geo.chunks[c].layerKeys()[l];
            }
        }
        connector.removeOrKeep(keys, k, "drop-select", true);
    }

    /**
     * Waits until layer {@code layer} is in the target, or the load ended without it.
     *
     * @return true when the layer is loaded; false on a miss ({@link #result()} says why)
     */
    public boolean awaitLayer(int layer) {
        lock.lock();
        try {
            while (layersLoaded <= layer && !done) {
                progress.awaitUninterruptibly();
            }
            if (layersLoaded > layer) {
                return true;
            }
            rethrowFailure();
            return false;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits for the whole load (layers, commit, hidden states, consume) and returns its outcome.
     *
     * @throws KVException when the load failed (a store error), as opposed to missing
     */
    public DropResult result() {
        lock.lock();
        try {
            while (!done) {
                progress.awaitUninterruptibly();
            }
            rethrowFailure();
            return result;
        } finally {
            lock.unlock();
        }
    }

    private void rethrowFailure() {
        if (failure instanceof KVException ke) {
            throw ke;
        }
        if (failure != null) {
            throw KVException.of(ErrorCode.INTERNAL, "drop-select failed: " + failure).store(store.uri())
                    .operation("dropSelect").cause(failure).build();
        }
    }

    /**
     * Waits for the load to end, so no copy into the target runs after this returns. It does not throw the load's
     * failure (that is {@link #result()}'s job), so a try-with-resources block never suppresses its own exception.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            while (!done) {
                progress.awaitUninterruptibly();
            }
        } finally {
            lock.unlock();
        }
    }
}
