package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.codec.Safetensors;
import dev.kvconnector.codec.SafetensorsObject;
import dev.kvconnector.codec.VllmV0Codec;
import dev.kvconnector.codec.VllmV0Object;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.VllmV0KeyScheme;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * vLLM V0 interop over any store: what kvconnector writes is what vLLM's MooncakeStoreConnector writes (keys,
 * safetensors bytes, {@code [2, L, T, H, D]} K-then-V order, {@code device_id}), and an entry shaped as vLLM
 * writes it is read back. Backends extend it with {@link #openStore()}.
 */
public abstract class VllmV0InteropContract {
    private static final KVLayout MHA = new KVLayout("v0-mha", AttentionKind.MHA, 3, 2, 8, DType.BF16, 4, 16);
    private static final KVLayout MLA = new KVLayout("v0-mla", AttentionKind.MLA, 2, 1, 24, DType.BF16, 4, 16);

    private KVStore store;
    private Arena arena;

    /** Opens a new store for one test. */
    protected abstract KVStore openStore();

    @BeforeEach
    void open() {
        arena = Arena.ofShared();
        store = openStore();
    }

    @AfterEach
    void close() {
        store.close();
        arena.close();
    }

    private static ChunkKeys vllmKeys(KVLayout layout, int rank, int[] tokens) {
        return KeySchemes.byName("vllm-v0").plan(new KeyContext("m", layout, rank, rank + 1, 256), RequestTokens.of(tokens))
                .chunks().getFirst();
    }

    /** The one connector with vLLM V0's key scheme and objects, as vLLM's rank {@code rank} on device {@code deviceId}. */
    private StoreConnector v0Connector(KVLayout layout, int rank, int deviceId, DropMode mode) {
        return StoreConnector.builder(store, layout).keyScheme(VllmV0KeyScheme.NAME).codec(VllmV0Codec.of(deviceId))
                .tensorParallel(rank, rank + 1).dropMode(mode).stagingBytes(64L << 20).build();
    }

    private Tensor hidden(KVLayout layout, int tokens, long seed) {
        TensorSpec s = TensorSpec.of(DType.BF16, tokens, layout.hiddenSize());
        return Tensor.host(s, seed == 0 ? arena.allocate(s.byteSize()) : Segments.random(arena, s.byteSize(), seed));
    }

    @Test
    void insertWritesTheBytesVllmV0Writes() {
        int tokens = 10;
        int[] prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
        try (PagedKVCache cache = PagedKVCache.allocate(MHA, 6);
             StoreConnector v0 = v0Connector(MHA, 1, 3, DropMode.CONSUME)) {
            for (int l = 0; l < 3; l++) {
                Segments.fill(cache.tensor(l, 0), l);
                Segments.fill(cache.tensor(l, 1), 100 + l);
            }
            BlockTable table = new BlockTable(new int[] {4, 0, 2}, 4, tokens);
            Tensor h = hidden(MHA, tokens, 9);
            try (InsertSession s = v0.beginInsert(RequestTokens.of(prompt))) {
                s.putLayers(LayerSource.paged(cache, table));
                s.putHidden(h);
                s.commit();
            }

            ChunkKeys k = vllmKeys(MHA, 1, prompt);
            assertTrue(k.layerKeys()[0].endsWith("_1") && k.hiddenKey().endsWith("_hidden_1"), k.toString());
            MemorySegment object = arena.allocate(store.size(k.layerKeys()[0]));
            store.getInto(k.layerKeys()[0], object);
            SafetensorsObject st = Safetensors.read(object);
            assertEquals(List.of("device_id", "tensor"), st.names().stream().sorted().toList());
            assertEquals(TensorSpec.of(DType.BF16, 2, 3, tokens, 2, 8), st.spec("tensor"));
            assertEquals(3, st.tensor("device_id").segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0));
            MemorySegment data = st.tensor("tensor").segment();
            long tb = MHA.bytesPerTokenPerTensor();
            for (int kv = 0; kv < 2; kv++) {
                for (int l = 0; l < 3; l++) {
                    for (int t = 0; t < tokens; t++) {
                        long off = (((long) kv * 3 + l) * tokens + t) * tb;
                        assertEquals(-1, MemorySegment.mismatch(data, off, off + tb, cache.tensor(l, kv),
                                table.slot(t) * tb, table.slot(t) * tb + tb), "kv " + kv + " layer " + l + " token " + t);
                    }
                }
            }
            MemorySegment hidObj = arena.allocate(store.size(k.hiddenKey()));
            store.getInto(k.hiddenKey(), hidObj);
            VllmV0Object hs = VllmV0Object.decode(hidObj);
            assertEquals(h.spec(), hs.tensor().spec());
            assertEquals(-1, h.segment().mismatch(hs.tensor().segment()));
        }
    }

    @Test
    void anEntryShapedAsVllmWritesItIsReadBackAndConsumed() {
        int tokens = 7;
        int[] prompt = {1, 2, 3, 4, 5, 6, 7};
        ChunkKeys k = vllmKeys(MLA, 0, prompt);
        TensorSpec spec = TensorSpec.of(DType.BF16, 2, 2, tokens, 1, 24);
        Tensor kv = Tensor.host(spec, Segments.random(arena, spec.byteSize(), 3));
        long planeBytes = tokens * MLA.bytesPerTokenPerTensor();
        for (int l = 0; l < 2; l++) {
            MemorySegment.copy(kv.segment(), l * planeBytes, kv.segment(), (2L + l) * planeBytes, planeBytes);
        }
        MemorySegment obj = arena.allocate(VllmV0Object.encodedSize(spec));
        VllmV0Object.encode(obj, kv, 0);
        store.put(k.layerKeys()[0], obj, PutOptions.DEFAULT);
        Tensor h = hidden(MLA, tokens, 4);
        MemorySegment hObj = arena.allocate(VllmV0Object.encodedSize(h.spec()));
        VllmV0Object.encode(hObj, h, 0);
        store.put(k.hiddenKey(), hObj, PutOptions.DEFAULT);

        try (PagedKVCache cache = PagedKVCache.allocate(MLA, 4);
             StoreConnector v0 = v0Connector(MLA, 0, 0, DropMode.CONSUME)) {
            BlockTable table = new BlockTable(new int[] {3, 1}, 4, tokens);
            Tensor gotHidden = hidden(MLA, tokens, 0);
            DropResult r = v0.dropSelect(RequestTokens.of(prompt), DropTarget.paged(cache, table).withHidden(gotHidden));
            assertTrue(r.isComplete(), r.toString());
            long tb = MLA.bytesPerTokenPerTensor();
            for (int l = 0; l < 2; l++) {
                for (int t = 0; t < tokens; t++) {
                    long off = (l * (long) tokens + t) * tb;
                    assertEquals(-1, MemorySegment.mismatch(kv.segment(), off, off + tb, cache.tensor(l, 0),
                            table.slot(t) * tb, table.slot(t) * tb + tb));
                }
            }
            assertEquals(-1, h.segment().mismatch(gotHidden.segment()));
            assertFalse(store.exists(k.layerKeys()[0]), "consumed KV object is still stored");
            assertFalse(store.exists(k.hiddenKey()));
        }
    }

    @Test
    void missingShapeMismatchedAndCorruptEntriesAreMissesWithReasons() {
        int[] prompt = {9, 9, 9, 9};
        ChunkKeys k = vllmKeys(MHA, 0, prompt);
        try (PagedKVCache cache = PagedKVCache.allocate(MHA, 2);
             StoreConnector v0 = v0Connector(MHA, 0, 0, DropMode.RETAIN)) {
            DropTarget target = DropTarget.paged(cache, new BlockTable(new int[] {0}, 4, 4));
            assertEquals(MissReason.ABSENT, v0.dropSelect(RequestTokens.of(prompt), target).reason());

            TensorSpec wrong = TensorSpec.of(DType.BF16, 2, 3, 4, 2, 4);
            MemorySegment obj = arena.allocate(VllmV0Object.encodedSize(wrong));
            VllmV0Object.encode(obj, Tensor.host(wrong, Segments.random(arena, wrong.byteSize(), 1)), 0);
            store.put(k.layerKeys()[0], obj, PutOptions.DEFAULT);
            Tensor h = hidden(MHA, 4, 2);
            MemorySegment hObj = arena.allocate(VllmV0Object.encodedSize(h.spec()));
            VllmV0Object.encode(hObj, h, 0);
            store.put(k.hiddenKey(), hObj, PutOptions.DEFAULT);
            assertEquals(MissReason.LAYOUT_MISMATCH, v0.dropSelect(RequestTokens.of(prompt), target).reason());

            TensorSpec right = VllmV0Codec.kvSpec(MHA, 4);
            MemorySegment junk = Segments.random(arena, VllmV0Object.encodedSize(right), 5);
            store.put(k.layerKeys()[0], junk, PutOptions.DEFAULT);
            DropResult corrupt = v0.dropSelect(RequestTokens.of(prompt), target);
            assertEquals(MissReason.CORRUPT, corrupt.reason(), corrupt.toString());
            assertEquals(3, v0.metrics().totalMisses());
        }
    }
}
