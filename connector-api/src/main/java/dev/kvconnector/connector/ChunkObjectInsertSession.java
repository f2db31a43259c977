package dev.kvconnector.connector;

import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import java.lang.foreign.MemorySegment;
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
final class ChunkObjectInsertSession extends StoreInsertBase {
    private final boolean[] skip;
    private final MemorySegment staging;
    private int layersPut;
    private boolean chunksSubmitted;
    private String[] hiddenKeys;
    private MemorySegment[] hiddenValues;
    private MemorySegment hiddenStaging;

    ChunkObjectInsertSession(StoreConnector connector, ChunkGeometry geo, boolean skipExisting) {
        super(connector, geo, "chunk put");
        this.skip = new boolean[geo.chunks.length];
        if (skipExisting) {
            for (int c = 0; c < skip.length; c++) {
                skip[c] = connector.store().exists(objects.layerKey(c, 0));
            }
        }
        this.staging = geo.chunks.length == 0 ? MemorySegment.NULL : pending.acquire(geo.layerStagingBytes);
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
        if (objects.hiddenKey(0) == null) {
            checkOpen("putHidden");
            throw usage(ErrorCode.UNSUPPORTED, "key scheme " + objects.keys().scheme() + " keeps no hidden states");
        }
        checkHidden(hidden);
        DType dtype = hidden.spec().dtype();
        long rowBytes = layout.hiddenSize() * (long) dtype.byteWidth();
        int n = geo.chunks.length;
        long[] offsets = hiddenOffsets(hidden);
        MemorySegment hidStaging = pending.acquire(offsets[n]);
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        for (int c = 0; c < n; c++) {
            ChunkKeys ck = geo.chunks[c];
            MemorySegment object = hidStaging.asSlice(offsets[c], objects.hiddenObjectBytes(c, dtype));
            MemorySegment.copy(hidden.segment(), ck.startToken() * rowBytes, object, objects.hiddenOffset(c),
                    ck.tokens() * rowBytes);
            objects.sealHidden(c, dtype, object);
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
        beginCommit();
        if (hiddenStaging != null) {
            MemorySegment lease = hiddenStaging;
            hiddenStaging = null;
            pending.submit(hiddenKeys, hiddenValues, lease);
            awaitPuts();
        }
        releaseStagings();
        committed(geo.chunks.length);
    }

    @Override
    void removeWritten() {
        releaseStagings();
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
            connector.removeOrKeep(keys, k);
        }
    }

    private void releaseStagings() {
        if (staging.byteSize() > 0) {
            connector.staging().release(staging);
        }
        if (hiddenStaging != null) {
            connector.staging().release(hiddenStaging);
            hiddenStaging = null;
        }
    }
}
