package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.codec.vllm.VllmV1Codec;
import dev.kvconnector.codec.vllm.VllmV1ValueLayout;
import dev.kvconnector.codec.vllm.VllmV1ValueLayout.TokenOrder;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * vLLM V1 interop through the connector over any store: the {@code vllm-v1} keys with {@link VllmV1Codec}'s values,
 * one object per full block holding every layer's K and V blocks (or MLA latent) back to back, no header. A store
 * module subclasses it with {@link #openStore()}; vLLM itself uses {@code mooncake://}.
 */
public abstract class VllmV1InteropContract {
    private static final KVLayout LAYOUT = new KVLayout("org/tiny-llama", AttentionKind.MHA, 3, 2, 8, DType.BF16, 16,
            64);
    private static final KVLayout MLA = new KVLayout("org/tiny-mla", AttentionKind.MLA, 2, 1, 24, DType.BF16, 16, 64);

    /** A fresh, empty store of at least 16 MiB, closed by the test. */
    protected abstract KVStore openStore();

    private static int[] tokens(int n, int seed) {
        return IntStream.range(0, n).map(i -> seed * 1000 + i).toArray();
    }

    private static PagedKVCache filled(KVLayout layout, int blocks, long seed) {
        PagedKVCache cache = PagedKVCache.allocate(layout, blocks);
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                Segments.fill(cache.tensor(l, t), seed + 31L * l + t);
            }
        }
        return cache;
    }

    private static KVStoreConnector connector(KVStore store, KVLayout layout, VllmV1Codec codec) {
        return KVStoreConnector.builder(store, layout).keyScheme(VllmV1KeyScheme.NAME).codec(codec).build();
    }

    private static void insert(KVStoreConnector kv, int[] prompt, PagedKVCache cache, BlockTable table) {
        try (InsertSession s = kv.beginInsert(RequestTokens.of(prompt))) {
            s.putLayers(dev.kvconnector.connector.LayerSource.paged(cache, table));
            s.commit();
        }
    }

    @Test
    public void fullBlocksRoundTripAndTheTrailingPartialBlockIsNotStored() {
        try (KVStore store = openStore();
             PagedKVCache src = filled(LAYOUT, 8, 1);
             PagedKVCache dst = PagedKVCache.allocate(LAYOUT, 8);
             KVStoreConnector kv = connector(store, LAYOUT, VllmV1Codec.of(TokenOrder.NHD))) {
            int[] prompt = tokens(40, 1);
            insert(kv, prompt, src, new BlockTable(new int[] {5, 2, 7}, 16, 40));
            KeyPlan plan = new VllmV1KeyScheme().plan(kv.keyContext(), RequestTokens.of(prompt));
            assertEquals(2, plan.chunks().size(), "one object per full block, none for the 8 trailing tokens");
            long objectBytes = new VllmV1ValueLayout(LAYOUT, TokenOrder.NHD).objectBytes();
            plan.chunks().forEach(c -> assertEquals(objectBytes, store.size(c.layerKeys()[0])));
            assertEquals(32, kv.lookup(RequestTokens.of(prompt)));
            BlockTable to = new BlockTable(new int[] {0, 3, 1}, 16, 40);
            DropResult r = kv.dropSelect(RequestTokens.of(prompt), DropTarget.paged(dst, to));
            assertEquals(32, r.matchedTokens(), String.valueOf(r));
            long blockBytes = LAYOUT.blockBytes();
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < 2; t++) {
                    assertEquals(-1, MemorySegment.mismatch(src.tensor(l, t), 5 * blockBytes, 6 * blockBytes,
                            dst.tensor(l, t), 0, blockBytes), "layer " + l + " tensor " + t + " block 0");
                    assertEquals(-1, MemorySegment.mismatch(src.tensor(l, t), 2 * blockBytes, 3 * blockBytes,
                            dst.tensor(l, t), 3 * blockBytes, 4 * blockBytes), "layer " + l + " tensor " + t);
                }
            }
        }
    }

    @Test
    public void aBlocksValueIsEveryLayersKThenVBlockBackToBackAsVllmWritesIt() {
        for (TokenOrder order : TokenOrder.values()) {
            try (KVStore store = openStore();
                 PagedKVCache src = filled(LAYOUT, 4, 2);
                 KVStoreConnector kv = connector(store, LAYOUT, VllmV1Codec.of(order));
                 Arena arena = Arena.ofConfined()) {
                int[] prompt = tokens(16, 2);
                insert(kv, prompt, src, new BlockTable(new int[] {3}, 16, 16));
                VllmV1ValueLayout value = new VllmV1ValueLayout(LAYOUT, order);
                String key = planKey(kv, prompt);
                MemorySegment got = arena.allocate(value.objectBytes());
                assertEquals(value.objectBytes(), store.getInto(key, got));
                long headBytes = 8 * 2;
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    for (int seg = 0; seg < 2; seg++) {
                        for (int tok = 0; tok < 16; tok++) {
                            for (int h = 0; h < 2; h++) {
                                long at = value.elementOffset(l, seg, tok, h, 0);
                                long from = (3L * 16 + tok) * 2 * headBytes + h * headBytes;
                                assertEquals(-1, MemorySegment.mismatch(got, at, at + headBytes, src.tensor(l, seg),
                                        from, from + headBytes), order + " layer " + l + " seg " + seg + " token " + tok
                                                + " head " + h);
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    public void anMlaBlockHoldsOneLatentPerLayer() {
        try (KVStore store = openStore();
             PagedKVCache src = filled(MLA, 2, 3);
             PagedKVCache dst = PagedKVCache.allocate(MLA, 2);
             KVStoreConnector kv = connector(store, MLA, VllmV1Codec.of(TokenOrder.NHD));
             Arena arena = Arena.ofConfined()) {
            int[] prompt = tokens(16, 3);
            insert(kv, prompt, src, new BlockTable(new int[] {1}, 16, 16));
            VllmV1ValueLayout value = new VllmV1ValueLayout(MLA, TokenOrder.NHD);
            MemorySegment got = arena.allocate(value.objectBytes());
            assertEquals(MLA.numLayers() * MLA.blockBytes(), store.getInto(planKey(kv, prompt), got));
            assertEquals(-1, MemorySegment.mismatch(got, value.latentOffset(1), value.latentOffset(1) + MLA.blockBytes(),
                    src.tensor(1, 0), MLA.blockBytes(), 2 * MLA.blockBytes()));
            assertEquals(16, kv.dropSelect(RequestTokens.of(prompt),
                    DropTarget.paged(dst, new BlockTable(new int[] {0}, 16, 16))).matchedTokens());
        }
    }

    @Test
    public void aValueOfTheWrongSizeIsALayoutMismatchMissThatNamesBothSizes() {
        try (KVStore store = openStore();
             PagedKVCache dst = PagedKVCache.allocate(LAYOUT, 2);
             KVStoreConnector kv = connector(store, LAYOUT, VllmV1Codec.of(TokenOrder.NHD));
             Arena arena = Arena.ofConfined()) {
            int[] prompt = tokens(16, 4);
            String key = planKey(kv, prompt);
            long right = new VllmV1ValueLayout(LAYOUT, TokenOrder.NHD).objectBytes();
            store.put(key, arena.allocate(right - 512), PutOptions.DEFAULT);
            DropResult r = kv.dropSelect(RequestTokens.of(prompt),
                    DropTarget.paged(dst, new BlockTable(new int[] {0}, 16, 16)));
            assertEquals(0, r.matchedTokens());
            assertEquals(MissReason.LAYOUT_MISMATCH, r.reason(), String.valueOf(r));
            assertNotNull(r.detail());
            assertTrue(r.detail().contains(String.valueOf(right)) && r.detail().contains(key), r.detail());
        }
    }

    @Test
    public void requestsThatShareWholeBlocksReuseThem() {
        try (KVStore store = openStore();
             PagedKVCache src = filled(LAYOUT, 8, 5);
             KVStoreConnector kv = connector(store, LAYOUT, VllmV1Codec.of(TokenOrder.NHD))) {
            int[] a = tokens(48, 5);
            insert(kv, a, src, new BlockTable(new int[] {0, 1, 2}, 16, 48));
            int[] b = a.clone();
            b[40] = -7;
            assertEquals(32, kv.lookup(RequestTokens.of(b)), "blocks 0 and 1 are shared, block 2 differs");
            int[] c = a.clone();
            c[3] = -7;
            assertEquals(0, kv.lookup(RequestTokens.of(c)), "a change in block 0 changes every later hash");
        }
    }

    @Test
    public void aChunkSizeOtherThanTheBlockSizeIsRefusedByName() {
        try (KVStore store = openStore()) {
            KVException e = assertThrows(KVException.class, () -> KVStoreConnector.builder(store, LAYOUT)
                    .keyScheme(VllmV1KeyScheme.NAME).chunkTokens(256).build());
            assertTrue(e.getMessage().contains("chunkTokens(256)") && e.getMessage().contains("16"), e.getMessage());
        }
    }

    @Test
    public void theSchemeImpliesThisCodec() {
        try (KVStore store = openStore();
             PagedKVCache src = filled(LAYOUT, 2, 6);
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).keyScheme(VllmV1KeyScheme.NAME).build()) {
            int[] prompt = tokens(16, 6);
            insert(kv, prompt, src, new BlockTable(new int[] {1}, 16, 16));
            assertEquals(new VllmV1ValueLayout(LAYOUT, TokenOrder.NHD).objectBytes(), store.size(planKey(kv, prompt)));
        }
    }

    private static String planKey(KVStoreConnector kv, int[] prompt) {
        KeyContext context = kv.keyContext();
        KeyPlan plan = new VllmV1KeyScheme().plan(context, RequestTokens.of(prompt));
        String key = plan.chunks().getFirst().layerKeys()[0];
        assertTrue(key.startsWith("tiny-llama@tp_rank:0@") || key.startsWith("tiny-mla@tp_rank:0@"), key);
        return key;
    }

    @Test
    public void aLookupCountsABlockOnlyWhenEveryTensorParallelRankHoldsIt() {
        try (KVStore store = openStore();
             PagedKVCache src = filled(LAYOUT, 4, 7);
             KVStoreConnector rank0 = KVStoreConnector.builder(store, LAYOUT).keyScheme(VllmV1KeyScheme.NAME)
                     .tensorParallel(0, 2).build();
             KVStoreConnector rank1 = KVStoreConnector.builder(store, LAYOUT).keyScheme(VllmV1KeyScheme.NAME)
                     .tensorParallel(1, 2).build()) {
            int[] prompt = tokens(32, 7);
            BlockTable table = new BlockTable(new int[] {2, 0}, 16, 32);
            insert(rank0, prompt, src, table);
            assertEquals(0, rank0.lookup(RequestTokens.of(prompt)), "rank 1 has not stored its half yet");
            assertEquals(0, rank1.lookup(RequestTokens.of(prompt)));
            insert(rank1, prompt, src, table);
            assertEquals(32, rank0.lookup(RequestTokens.of(prompt)));
            assertEquals(32, rank1.lookup(RequestTokens.of(prompt)));
        }
    }
}
