package dev.kvconnector.benchmarks;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * One request moved between two host paged caches through a connector, as an engine with vLLM's flash layout does:
 * the insert gathers every layer from a source cache through a shuffled block table, and the drop-select scatters
 * into a destination cache through another. Each cache holds twice the request's blocks, so the table's blocks are
 * spread over memory as a running engine's are. Connector settings match {@code TransferWorkload}'s, so the paged
 * rows and the contiguous rows differ only in the source and sink.
 */
final class PagedWorkload implements AutoCloseable {
    private final KVStoreConnector connector;
    private final KVLayout layout;
    private final PagedKVCache source;
    private final PagedKVCache target;
    private final BlockTable sourceTable;
    private final BlockTable targetTable;
    private final int[] prompt;
    /** Where every drop-select lands, made once as an engine's would be. */
    private final DropTarget dropTarget;
    /** The session of the last insert, ended, in which the next one begins. */
    private InsertSession lastInsert;

    PagedWorkload(KVStore store, KVLayout layout, int tokens) {
        this.layout = layout;
        this.connector = KVStoreConnector.builder(store, layout).modelId("bench/" + layout.name())
                .dropMode(DropMode.CONSUME).checksums(true)
                .stagingBytes(Math.max(1L << 30, 4 * layout.layerBytes(tokens) + (64L << 20))).build();
        int blocks = (tokens + layout.blockSize() - 1) / layout.blockSize();
        SplittableRandom r = new SplittableRandom(16);
        source = randomCache(layout, 2 * blocks, r);
        target = PagedKVCache.allocate(layout, 2 * blocks);
        sourceTable = new BlockTable(shuffledBlocks(2 * blocks, blocks, r), layout.blockSize(), tokens);
        targetTable = new BlockTable(shuffledBlocks(2 * blocks, blocks, r), layout.blockSize(), tokens);
        prompt = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            prompt[i] = r.nextInt(128_000);
        }
        dropTarget = DropTarget.paged(target, targetTable);
    }

    /** A cache of {@code blocks} blocks, every tensor filled with random words from {@code r}. */
    static PagedKVCache randomCache(KVLayout layout, int blocks, SplittableRandom r) {
        PagedKVCache cache = PagedKVCache.allocate(layout, blocks);
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                MemorySegment s = cache.tensor(l, t);
                for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
                    s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
                }
            }
        }
        return cache;
    }

    /** The first {@code used} of {@code cacheBlocks} block ids in a random order: a running engine's table. */
    static int[] shuffledBlocks(int cacheBlocks, int used, SplittableRandom r) {
        int[] all = new int[cacheBlocks];
        for (int i = 0; i < all.length; i++) {
            all[i] = i;
        }
        for (int i = all.length - 1; i > 0; i--) {
            int j = r.nextInt(i + 1);
            int t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        return java.util.Arrays.copyOf(all, used);
    }

    RequestTokens request(int i) {
        return RequestTokens.of(prompt).inNamespace("bench-paged-" + i);
    }

    /** Inserts {@code request} in the last insert's session: each layer gathered from the source cache, then commit. */
    void insert(RequestTokens request) {
        InsertSession s = connector.beginInsert(request, lastInsert);
        lastInsert = s;
        try (s) {
            for (int l = 0; l < layout.numLayers(); l++) {
                s.putLayer(l, source, sourceTable);
            }
            s.commit();
        }
    }

    /** Drop-selects {@code request} into the target cache (consuming it). */
    DropResult dropSelect(RequestTokens request) {
        return connector.dropSelect(request, dropTarget);
    }

    /** Whether every token of every layer's tensors landed in the target cache intact. */
    boolean targetMatchesSource() {
        long tb = layout.bytesPerTokenPerTensor();
        for (int l = 0; l < layout.numLayers(); l++) {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                for (int tok = 0; tok < sourceTable.tokens(); tok++) {
                    long s = sourceTable.slot(tok) * tb;
                    long d = targetTable.slot(tok) * tb;
                    if (MemorySegment.mismatch(source.tensor(l, t), s, s + tb, target.tensor(l, t), d, d + tb) != -1) {
                        return false;
                    }
                }
            }
        }
        return true;
    }

    @Override
    public void close() {
        try {
            connector.close();
        } finally {
            source.close();
            target.close();
        }
    }
}
