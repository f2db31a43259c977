package dev.kvconnector.connector;

import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * The {@link InsertSession} of a {@link StoreConnector} whose codec completes its objects
 * {@link Completion#PER_CHUNK} (LMCache chunk objects, vLLM V0): every chunk's object is assembled in one pooled
 * staging segment across the layers, each layer's tensors copied to where the codec places them (a strided
 * placement, such as LMCache's {@code huggingface} head-major layout, goes through a pooled contiguous scratch);
 * after the last layer each object is sealed and put on the connector's I/O threads. {@link #commit()} waits for
 * the puts and the hidden-state objects; these formats write no manifest, so a chunk is visible once its object is.
 *
 * <p>With skip-existing on, chunks whose object is already present when the insert begins are neither gathered nor
 * put (LMCache's "store only what is missing"), and an abort leaves them alone. Host sources only: a device source
 * gets {@code UNSUPPORTED}.
 */
final class ChunkObjectInsertSession implements InsertSession, InsertChannel {
    private enum State { OPEN, COMMITTED, ABORTED }

    private final StoreConnector connector;
    private final ChunkGeometry geo;
    private final ObjectPlan objects;
    private final KVLayout layout;
    private final int tokens;
    private final boolean[] layerPut;
    private final boolean[] skip;
    private final MemorySegment staging;
    private int layersPut;
    private boolean chunksSubmitted;
    private boolean hiddenPut;
    private String[] hiddenKeys;
    private MemorySegment[] hiddenValues;
    private MemorySegment hiddenStaging;
    private State state = State.OPEN;
    private final PendingPuts pending;

    ChunkObjectInsertSession(StoreConnector connector, ChunkGeometry geo, boolean skipExisting) {
        this.connector = connector;
        this.geo = geo;
        this.objects = geo.objects;
        this.layout = connector.layout();
        this.tokens = geo.plan.totalTokens();
        this.layerPut = new boolean[layout.numLayers()];
        this.skip = new boolean[geo.chunks.length];
        this.pending = new PendingPuts(connector);
        if (skipExisting) {
            for (int c = 0; c < skip.length; c++) {
                skip[c] = connector.store().exists(objects.layerKey(c, 0));
            }
        }
        this.staging = geo.chunks.length == 0 ? MemorySegment.NULL : pending.acquire(geo.layerStagingBytes);
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
        return pending.acquire(bytes);
    }

    @Override
    public void releaseStaging(MemorySegment segment) {
        connector.staging().release(segment);
    }

    @Override
    public void putHost(int layer, HostLayerSource source) {
        long start = System.nanoTime();
        long bytes = 0;
        MemorySegment scratch = null;
        try {
            for (int c = 0; c < geo.chunks.length; c++) {
                if (skip[c]) {
                    continue;
                }
                ChunkKeys ck = geo.chunks[c];
                for (int t = 0; t < geo.tensors; t++) {
                    TensorPlacement p = objects.placement(c, layer, t);
                    bytes += p.bytes();
                    long base = geo.layerOffsets[c] + p.offset();
                    if (p.isContiguous()) {
                        source.gather(layer, t, ck.startToken(), ck.endToken(), staging, base);
                        continue;
                    }
                    if (scratch == null) {
                        scratch = pending.acquire(maxTensorBytes());
                    }
                    source.gather(layer, t, ck.startToken(), ck.endToken(), scratch, 0);
                    StridedCopy.toPlacement(scratch, staging, base, p);
                }
            }
        } finally {
            if (scratch != null) {
                connector.staging().release(scratch);
            }
        }
        layerPut[layer] = true;
        layersPut++;
        connector.metricsRecorder().recordInsertLayer(System.nanoTime() - start, bytes);
        if (layersPut == layerPut.length) {
            submitChunks();
        }
    }

    private long maxTensorBytes() {
        long max = 0;
        for (ChunkKeys ck : geo.chunks) {
            max = Math.max(max, ck.tokens() * geo.tokenBytes);
        }
        return max;
    }

    /** Seals every chunk's object, complete now that its last layer is in, and puts them. */
    private void submitChunks() {
        int n = 0;
        for (boolean s : skip) {
            n += s ? 0 : 1;
        }
        chunksSubmitted = true;
        if (n == 0) {
            return;
        }
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        int k = 0;
        for (int c = 0; c < geo.chunks.length; c++) {
            if (skip[c]) {
                continue;
            }
            MemorySegment object = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
            objects.seal(c, layerPut.length - 1, object);
            keys[k] = objects.layerKey(c, 0);
            values[k++] = object;
        }
        pending.submit(keys, values, null);
    }

    @Override
    public void submitStaged(int layer, MemorySegment layerStaging, long startNanos) {
        throw deviceUnsupported();
    }

    @Override
    public void submitDetached(int layer, MemorySegment[] objectSegments, MemorySegment lease,
                               Consumer<MemorySegment> releaseLease, long startNanos) {
        throw deviceUnsupported();
    }

    private KVException deviceUnsupported() {
        return usage(ErrorCode.UNSUPPORTED, "codec " + objects.keys().scheme() + " objects hold every layer of a "
                + "chunk and are assembled in host memory; a source that moves its layers itself (a device cache) "
                + "cannot fill them yet. Copy the layers to host tensors, or use the kvc-v1 key scheme");
    }

    @Override
    public void putHidden(Tensor hidden) {
        checkOpen("putHidden");
        hidden.requireHostAccessible("putHidden");
        TensorSpec s = hidden.spec();
        if (objects.hiddenKey(0) == null) {
            throw usage(ErrorCode.UNSUPPORTED, "key scheme " + objects.keys().scheme() + " keeps no hidden states");
        }
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
        MemorySegment hidStaging = pending.acquire(total);
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        for (int c = 0; c < n; c++) {
            ChunkKeys ck = geo.chunks[c];
            MemorySegment object = hidStaging.asSlice(offsets[c], objects.hiddenObjectBytes(c, s.dtype()));
            MemorySegment.copy(hidden.segment(), ck.startToken() * rowBytes, object, objects.hiddenOffset(c),
                    ck.tokens() * rowBytes);
            objects.sealHidden(c, s.dtype(), object);
            keys[c] = objects.hiddenKey(c);
            values[c] = object;
        }
        hiddenPut = true;
        hiddenKeys = keys;
        hiddenValues = values;
        hiddenStaging = hidStaging;
    }

    /**
     * {@inheritDoc} The chunk objects, put after the last layer, are the entry: there is no manifest. The hidden
     * states go last, once the chunk objects are stored, so that a reader that finds them finds the KV.
     */
    @Override
    public void commit() {
        checkOpen("commit");
        for (int l = 0; l < layerPut.length; l++) {
            if (!layerPut[l]) {
                abort();
                throw usage(ErrorCode.INVALID_ARGUMENT, "layer " + l + " of " + layerPut.length
                        + " was never put; the insert was aborted");
            }
        }
        awaitPuts();
        if (hiddenStaging != null) {
            MemorySegment lease = hiddenStaging;
            hiddenStaging = null;
            pending.submit(hiddenKeys, hiddenValues, lease);
            awaitPuts();
        }
        state = State.COMMITTED;
        releaseStaging();
        connector.metricsRecorder().recordCommit();
        connector.emitStored(geo, geo.chunks.length);
    }

    private void awaitPuts() {
        pending.await();
        Throwable f = pending.failure();
        if (f != null) {
            abort();
            throw f instanceof KVException ke ? ke : KVException.of(ErrorCode.INTERNAL, "a chunk put failed: " + f)
                    .store(connector.endpoint()).operation("commit").cause(f).build();
        }
    }

    @Override
    public void abort() {
        if (state != State.OPEN) {
            return;
        }
        state = State.ABORTED;
        pending.await();
        releaseStaging();
        int n = geo.chunks.length;
        String[] keys = new String[2 * n];
        int k = 0;
        for (int c = 0; c < n; c++) {
            if (chunksSubmitted && !skip[c]) {
                keys[k++] = objects.layerKey(c, 0);
            }
            if (hiddenPut) {
                keys[k++] = objects.hiddenKey(c);
            }
        }
        if (k > 0) {
            connector.removeOrKeep(keys, k, "abort", false);
        }
        connector.metricsRecorder().recordAbort();
    }

    private void releaseStaging() {
        if (staging.byteSize() > 0) {
            connector.staging().release(staging);
        }
        if (hiddenStaging != null) {
            connector.staging().release(hiddenStaging);
            hiddenStaging = null;
        }
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
    }

    private void checkOpen(String op) {
        if (state != State.OPEN) {
            throw KVException.of(ErrorCode.CLOSED, "the insert was already " + state.name().toLowerCase(Locale.ROOT))
                    .operation(op).build();
        }
    }

    private KVException usage(ErrorCode code, String detail) {
        return KVException.of(code, detail).store(connector.endpoint()).operation("insert").build();
    }
}
