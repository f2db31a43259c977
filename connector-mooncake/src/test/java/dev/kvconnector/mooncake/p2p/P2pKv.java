package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Queue;
import java.util.UUID;

/** The KV both sides of the peer-to-peer tests compute: every byte derives from a seed, layer and tensor. */
final class P2pKv {
    /** 4 layers, 2 KV heads of 16, bf16, 16-token blocks, hidden 32 (the connector contract's MHA layout). */
    static final KVLayout LAYOUT = new KVLayout("test-mha", AttentionKind.MHA, 4, 2, 16, DType.BF16, 16, 32);
    /** Blocks in each side's cache. */
    static final int CACHE_BLOCKS = 64;
    /** What D's cache holds where nobody wrote. */
    static final byte UNTOUCHED = 0x11;

    private P2pKv() {
    }

    /**
     * D over the engine at {@code uri}: {@code cache} registered, {@code layerTimeoutMillis} per layer, and each failure
     * on its I/O threads added to {@code errors} as "where: message".
     */
    static TransferEngineConnector consumer(String uri, PagedKVCache cache, long layerTimeoutMillis,
                                            Queue<String> errors) {
        return TransferEngineConnector.builder(uri, LAYOUT).registerCache(cache).layerTimeoutMillis(layerTimeoutMillis)
                .stagingBytes(4L << 20).errorHandler((where, e) -> errors.add(where + ": " + e.getMessage())).build();
    }

    /** A transfer id no other test uses. */
    static String transferId() {
        return "t-" + UUID.randomUUID();
    }

    /** A request of {@code tokens} tokens in the namespace {@code tid}, which ties P's insert to D's drop-select. */
    static RequestTokens request(String tid, int tokens) {
        return RequestTokens.of(new int[tokens]).inNamespace(tid);
    }

    /**
     * Inserts {@code request} through {@code p} under {@code params}: every layer of {@code cache} through
     * {@code blocks}, then {@code hidden} (null for none), then the commit.
     */
    static void insertAll(TransferEngineConnector p, RequestTokens request, KVTransferParams params,
                          PagedKVCache cache, BlockTable blocks, Tensor hidden) {
        try (InsertSession insert = p.beginInsert(request, params)) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                insert.putLayer(l, cache, blocks);
            }
            if (hidden != null) {
                insert.putHidden(hidden);
            }
            insert.commit();
        }
    }

    /** P over the engine at {@code uri}: 4 MiB of staging, 5 s per transfer. */
    static TransferEngineConnector producer(String uri) {
        return TransferEngineConnector.builder(uri, LAYOUT).stagingBytes(4L << 20).transferTimeoutMillis(5000).build();
    }

    /** The contiguous {@code [tokens, kvHeads, headSize]} bytes of one tensor of one layer. */
    static MemorySegment expected(Arena arena, int layer, int tensor, int tokens, long seed) {
        return Segments.random(arena, tokens * LAYOUT.bytesPerTokenPerTensor(), seed * 1000 + layer * 10L + tensor);
    }

    /** The hidden states {@code [tokens, hiddenSize]} in fp32. */
    static Tensor hidden(Arena arena, int tokens, long seed) {
        TensorSpec spec = TensorSpec.of(DType.FP32, tokens, LAYOUT.hiddenSize());
        return Tensor.host(spec, seed == 0 ? arena.allocate(spec.byteSize()) : Segments.random(arena,
                spec.byteSize(), seed * 7919));
    }

    /** A block table of {@code count} blocks from {@code first}, every {@code step}-th (consecutive with 1). */
    static BlockTable table(int first, int step, int count, int tokens) {
        int[] ids = new int[count];
        for (int i = 0; i < count; i++) {
            ids[i] = first + i * step;
        }
        return new BlockTable(ids, LAYOUT.blockSize(), tokens);
    }

    /** Writes the request's KV into {@code cache} at {@code table}, as P's forward pass would. */
    static void compute(PagedKVCache cache, BlockTable table, long seed) {
        try (Arena a = Arena.ofConfined()) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    cache.scatter(expected(a, l, t, table.tokens(), seed), 0, l, t, table, 0, table.tokens());
                }
            }
        }
    }

    /** A cache whose every byte is {@link #UNTOUCHED}. */
    static PagedKVCache untouchedCache() {
        PagedKVCache c = PagedKVCache.allocate(LAYOUT, CACHE_BLOCKS);
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                c.tensor(l, t).fill(UNTOUCHED);
            }
        }
        return c;
    }

    /** The first byte of {@code layer} at {@code table} that differs from the expected KV, or -1. */
    static long firstMismatch(PagedKVCache cache, BlockTable table, int layer, long seed) {
        try (Arena a = Arena.ofConfined()) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                MemorySegment want = expected(a, layer, t, table.tokens(), seed);
                MemorySegment got = a.allocate(want.byteSize());
                cache.gather(layer, t, table, 0, table.tokens(), got, 0);
                long at = MemorySegment.mismatch(want, 0, want.byteSize(), got, 0, got.byteSize());
                if (at >= 0) {
                    return t * want.byteSize() + at;
                }
            }
            return -1;
        }
    }

    /** Whether every byte of {@code layer} at {@code table}'s tokens is still {@link #UNTOUCHED}. */
    static boolean untouched(PagedKVCache cache, BlockTable table, int layer) {
        try (Arena a = Arena.ofConfined()) {
            long bytes = table.tokens() * LAYOUT.bytesPerTokenPerTensor();
            MemorySegment got = a.allocate(bytes);
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                cache.gather(layer, t, table, 0, table.tokens(), got, 0);
                for (long i = 0; i < bytes; i++) {
                    if (got.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != UNTOUCHED) {
                        return false;
                    }
                }
            }
            return true;
        }
    }

    /**
     * Whether every block of the cache outside {@code owned} (block ids) still holds only {@link #UNTOUCHED}.
     */
    static boolean untouchedOutside(PagedKVCache cache, int[]... owned) {
        java.util.BitSet mine = new java.util.BitSet();
        for (int[] ids : owned) {
            for (int id : ids) {
                mine.set(id);
            }
        }
        long blockBytes = LAYOUT.blockSize() * LAYOUT.bytesPerTokenPerTensor();
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                MemorySegment s = cache.tensor(l, t);
                for (int b = 0; b < CACHE_BLOCKS; b++) {
                    if (mine.get(b)) {
                        continue;
                    }
                    for (long i = b * blockBytes; i < (b + 1) * blockBytes; i++) {
                        if (s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != UNTOUCHED) {
                            return false;
                        }
                    }
                }
            }
        }
        return true;
    }

    /** Block ids of {@code table}, in token order. */
    static int[] ids(BlockTable table) {
        int[] ids = new int[(table.tokens() + LAYOUT.blockSize() - 1) / LAYOUT.blockSize()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = (int) (table.slot(i * LAYOUT.blockSize()) / LAYOUT.blockSize());
        }
        return ids;
    }
}
