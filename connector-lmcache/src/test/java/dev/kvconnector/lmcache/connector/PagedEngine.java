package dev.kvconnector.lmcache.connector;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * One test "engine": a paged KV cache and a request's block table over shuffled blocks, so that a request's tokens
 * are scattered over the cache the way vLLM's are.
 */
final class PagedEngine implements AutoCloseable {
    final KVLayout layout;
    final PagedKVCache cache;
    final BlockTable blocks;

    private PagedEngine(KVLayout layout, PagedKVCache cache, BlockTable blocks) {
        this.layout = layout;
        this.cache = cache;
        this.blocks = blocks;
    }

    /** A zeroed cache with room for {@code tokens} tokens (plus spare blocks), blocks shuffled by {@code seed}. */
    static PagedEngine empty(KVLayout layout, int tokens, long seed) {
        int need = (tokens + layout.blockSize() - 1) / layout.blockSize();
        int numBlocks = need + 3;
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < numBlocks; i++) {
            ids.add(i);
        }
        Collections.shuffle(ids, new Random(seed));
        int[] table = new int[need];
        for (int i = 0; i < need; i++) {
            table[i] = ids.get(i);
        }
        return new PagedEngine(layout, PagedKVCache.allocate(layout, numBlocks), new BlockTable(table,
                layout.blockSize(), tokens));
    }

    /** A cache whose every byte is random (from {@code seed}). */
    static PagedEngine filled(KVLayout layout, int tokens, long seed) {
        PagedEngine e = empty(layout, tokens, seed);
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                Segments.fill(e.cache.tensor(l, t), seed * 1000 + l * 10 + t);
            }
        }
        return e;
    }

    /** Tokens {@code [from, to)} of one layer's tensor, gathered contiguous. */
    MemorySegment tokens(Arena arena, int layer, int tensor, int from, int to) {
        MemorySegment flat = arena.allocate(Math.max(1, (to - from) * layout.bytesPerTokenPerTensor()));
        cache.gather(layer, tensor, blocks, from, to, flat, 0);
        return flat.asSlice(0, (to - from) * layout.bytesPerTokenPerTensor());
    }

    /** Whether tokens {@code [from, to)} of every layer and tensor equal {@code other}'s. */
    boolean sameKv(PagedEngine other, int from, int to) {
        try (Arena arena = Arena.ofConfined()) {
            for (int l = 0; l < layout.numLayers(); l++) {
                for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                    if (tokens(arena, l, t, from, to).mismatch(other.tokens(arena, l, t, from, to)) != -1) {
                        return false;
                    }
                }
            }
        }
        return true;
    }

    /** Whether tokens {@code [from, to)} are all zero in every layer and tensor (never written). */
    boolean allZero(int from, int to) {
        try (Arena arena = Arena.ofConfined()) {
            long bytes = (to - from) * layout.bytesPerTokenPerTensor();
            MemorySegment zero = arena.allocate(Math.max(1, bytes)).asSlice(0, bytes);
            for (int l = 0; l < layout.numLayers(); l++) {
                for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                    if (tokens(arena, l, t, from, to).mismatch(zero) != -1) {
                        return false;
                    }
                }
            }
        }
        return true;
    }

    @Override
    public void close() {
        cache.close();
    }
}
