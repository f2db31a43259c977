package dev.kvconnector.connector;

import dev.kvconnector.codec.SafetensorsLayout;
import dev.kvconnector.codec.VllmV0Object;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;

/**
 * Exchanges KV with vLLM V0's MooncakeStoreConnector, byte for byte: per request one object under
 * {@code "{blake2b}_{rank}"} holding safetensors {@code {"tensor": [2, L, T, H, D], "device_id": int32}} (K then V;
 * for MLA the latent twice, as vLLM stores it) and one under {@code "{blake2b}_hidden_{rank}"} holding
 * {@code [T, hidden]}. Keys come from the {@code vllm-v0} scheme, values from {@link VllmV0Object}.
 *
 * <p>Unlike vLLM V0 it checks every result: the KV object is written first and the hidden states last, so a
 * reader that finds the hidden states finds the KV; a repeated prompt replaces the old entry instead of failing;
 * a consumer removes what it read ({@link DropMode#CONSUME}) so the store does not fill up. A miss is a
 * {@link DropResult} with a reason, and a wrong shape is {@link MissReason#LAYOUT_MISMATCH}, not garbage.
 *
 * <p>Whole-request objects cannot stream layer by layer; use {@link KVStoreConnector} for that.
 */
public final class VllmV0Transfer implements AutoCloseable {
    private final KVStore store;
    private final KVLayout layout;
    private final KeyContext keys;
    private final int deviceId;
    private final DropMode mode;
    private final SegmentPool staging;
    private final ConnectorMetrics metrics = new ConnectorMetrics();

    /**
     * @param store the store vLLM uses (for example {@code mooncake://...}); the caller closes it
     * @param layout this rank's layout
     * @param tpRank the tensor-parallel rank, as in the key
     * @param deviceId written into {@code device_id} (vLLM writes the producer's CUDA device, or -1 for CPU)
     * @param mode whether a drop-select removes the entry
     * @param stagingBytes bound of the staging pool
     */
    public VllmV0Transfer(KVStore store, KVLayout layout, int tpRank, int deviceId, DropMode mode, long stagingBytes) {
        this.store = store;
        this.layout = layout;
        this.keys = new KeyContext("vllm-v0", layout, tpRank, tpRank + 1, KeyContext.DEFAULT_CHUNK_TOKENS);
        this.deviceId = deviceId;
        this.mode = mode;
        this.staging = new SegmentPool(stagingBytes);
    }

    private ChunkKeys keysOf(RequestTokens request) {
        return KeySchemes.byName("vllm-v0").plan(keys, request).chunks().getFirst();
    }

    /** The KV tensor's spec for {@code tokens} tokens: {@code [2, L, T, H, D]}. */
    public TensorSpec kvSpec(int tokens) {
        return TensorSpec.of(layout.dtype(), 2, layout.numLayers(), tokens, layout.kvHeads(), layout.headSize());
    }

    /** Inserts a request gathered from a paged cache, plus its hidden states {@code [T, hidden]}. */
    public void insert(RequestTokens request, PagedKVCache cache, TokenSlots slots, Tensor hidden) {
        int t = request.totalTokens();
        insert(request, hidden, (dst, layer, kv, tensor) -> cache.gather(layer, tensor, slots, 0, t, dst, 0));
    }

    /** Inserts a request from contiguous per-layer tensors {@code [layer][tensor]} of {@code [T, H, D]}. */
    public void insert(RequestTokens request, Tensor[][] layers, Tensor hidden) {
        insert(request, hidden, (dst, layer, kv, tensor) -> MemorySegment.copy(layers[layer][tensor].segment(), 0, dst, 0,
                dst.byteSize()));
    }

    private interface LayerSource {
        void copy(MemorySegment dst, int layer, int kv, int tensor);
    }

    private void insert(RequestTokens request, Tensor hidden, LayerSource source) {
        int tokens = request.totalTokens();
        hidden.requireHostAccessible("insert");
        if (hidden.spec().rank() != 2 || hidden.spec().dim(0) != tokens || hidden.spec().dim(1) != layout.hiddenSize()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "hidden states are " + hidden.spec() + ", expected ["
                    + tokens + ", " + layout.hiddenSize() + "]").store(store.uri()).operation("insert").build();
        }
        ChunkKeys k = keysOf(request);
        TensorSpec spec = kvSpec(tokens);
        SafetensorsLayout kvLayout = VllmV0Object.layout(spec);
        long planeBytes = (long) tokens * layout.bytesPerTokenPerTensor();
        MemorySegment buf = staging.acquire(Math.max(kvLayout.encodedSize(), VllmV0Object.encodedSize(hidden.spec())));
        try {
            MemorySegment object = buf.asSlice(0, kvLayout.encodedSize());
            MemorySegment tensor = VllmV0Object.prepare(object, kvLayout, deviceId);
            for (int kv = 0; kv < 2; kv++) {
                for (int l = 0; l < layout.numLayers(); l++) {
                    int t = layout.tensorsPerLayer() == 2 ? kv : 0;
                    source.copy(tensor.asSlice(((long) kv * layout.numLayers() + l) * planeBytes, planeBytes), l, kv, t);
                }
            }
            store.put(k.layerKeys()[0], object, PutOptions.DEFAULT);
            long n = VllmV0Object.encode(buf, hidden, deviceId);
            store.put(k.hiddenKey(), buf.asSlice(0, n), PutOptions.DEFAULT);
            metrics.recordCommit();
        } finally {
            staging.release(buf);
        }
    }

    /** Reads a request's KV into {@code target} (all-or-nothing) and its hidden states into the target's hidden tensor. */
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        int tokens = request.totalTokens();
        if (!(target.layers() instanceof HostLayerSink sink)) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "vLLM V0 objects are read into host memory; "
                    + target.layers().getClass().getSimpleName() + " is not a host sink").store(store.uri())
                    .operation("dropSelect").hint("drop-select into a host paged cache or contiguous tensors").build();
        }
        sink.check(layout, tokens, "dropSelect", store.uri());
        ChunkKeys k = keysOf(request);
        DropResult r = load(k, tokens, target, sink);
        metrics.recordResult(r);
        if (r.isHit() && mode == DropMode.CONSUME) {
            store.removeConsumed(new String[] {k.hiddenKey(), k.layerKeys()[0]}, 2);
        }
        return r;
    }

    private DropResult load(ChunkKeys k, int tokens, DropTarget target, HostLayerSink sink) {
        long hiddenSize = store.size(k.hiddenKey());
        if (hiddenSize < 0) {
            return DropResult.miss(tokens, MissReason.ABSENT, "no hidden states under " + k.hiddenKey());
        }
        TensorSpec spec = kvSpec(tokens);
        long expected = VllmV0Object.encodedSize(spec);
        MemorySegment buf = staging.acquire(Math.max(expected, hiddenSize));
        try {
            long r = store.getInto(k.layerKeys()[0], buf.asSlice(0, expected));
            if (GetResult.isMiss(r)) {
                return DropResult.miss(tokens, MissReason.ABSENT, "hidden states exist but no KV under " + k.layerKeys()[0]);
            }
            if (GetResult.isTooSmall(r)) {
                return DropResult.miss(tokens, MissReason.LAYOUT_MISMATCH, k.layerKeys()[0] + " is "
                        + GetResult.requiredSize(r) + " bytes; " + spec + " needs " + expected);
            }
            VllmV0Object kv;
            try {
                kv = VllmV0Object.decode(buf.asSlice(0, r));
            } catch (KVException e) {
                return DropResult.miss(tokens, MissReason.CORRUPT, k.layerKeys()[0] + ": " + e.getMessage());
            }
            if (!kv.tensor().spec().equals(spec)) {
                return DropResult.miss(tokens, MissReason.LAYOUT_MISMATCH, k.layerKeys()[0] + " holds "
                        + kv.tensor().spec() + ", this layout reads " + spec);
            }
            MemorySegment data = kv.tensor().segment();
            long planeBytes = (long) tokens * layout.bytesPerTokenPerTensor();
            for (int l = 0; l < layout.numLayers(); l++) {
                for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                    sink.scatter(l, t, data, ((long) t * layout.numLayers() + l) * planeBytes, 0, tokens);
                }
            }
            if (target.hidden() != null) {
                long h = store.getInto(k.hiddenKey(), buf.asSlice(0, hiddenSize));
                if (!GetResult.isHit(h)) {
                    return DropResult.miss(tokens, MissReason.ABSENT, "hidden states under " + k.hiddenKey()
                            + " vanished while reading");
                }
                VllmV0Object hs;
                try {
                    hs = VllmV0Object.decode(buf.asSlice(0, h));
                } catch (KVException e) {
                    return DropResult.miss(tokens, MissReason.CORRUPT, k.hiddenKey() + ": " + e.getMessage());
                }
                TensorSpec want = TensorSpec.of(target.hidden().spec().dtype(), tokens, layout.hiddenSize());
                if (!hs.tensor().spec().equals(want)) {
                    return DropResult.miss(tokens, MissReason.LAYOUT_MISMATCH, k.hiddenKey() + " holds "
                            + hs.tensor().spec() + ", expected " + want);
                }
                MemorySegment.copy(hs.tensor().segment(), 0, target.hidden().segment(), 0, want.byteSize());
            }
            return DropResult.hit(tokens, tokens);
        } finally {
            staging.release(buf);
        }
    }

    /** Commits, hits and misses by reason (whole-request objects have no per-layer latency). */
    public ConnectorMetrics.Snapshot metrics() {
        return metrics.snapshot();
    }

    /** Frees the staging memory; the store stays open. */
    @Override
    public void close() {
        staging.close();
    }
}
