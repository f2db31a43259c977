package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.sun.management.ThreadMXBean;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * What the connector allocates on the caller's thread for a steady stream of requests of content never stored before
 * over {@code memory:} (claims and views, every key new), with each insert begun in the session of the one before and
 * whole-request drop-selects: nothing. A request here has 4 chunks and 24 layers, so 104 objects and keys.
 */
class RequestAllocationTest {
    private static final ThreadMXBean THREADS = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int TOKENS = 1024;
    private static final int REQUESTS = 200;

    @Test
    void aSteadyStreamOfNewRequestsThroughPagedCachesAllocatesNothing() {
        try (KVStore store = KVStores.open("memory:?capacity=256MiB");
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(256)
                     .dropMode(DropMode.CONSUME).build();
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, TOKENS / LAYOUT.blockSize());
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, TOKENS / LAYOUT.blockSize())) {
            int[] blocks = new int[TOKENS / LAYOUT.blockSize()];
            for (int i = 0; i < blocks.length; i++) {
                blocks[i] = blocks.length - 1 - i;
            }
            BlockTable table = new BlockTable(blocks, LAYOUT.blockSize(), TOKENS);
            DropTarget into = DropTarget.paged(target, table);
            InsertSession[] last = new InsertSession[1];
            long perRound = leastPerRound(r -> {
                InsertSession s = kv.beginInsert(r, last[0]);
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    s.putLayer(l, source, table);
                }
                s.commit();
                last[0] = s;
                requireHit(kv.dropSelect(r, into));
            });
            assertEquals(0, perRound, REQUESTS + " inserts and drop-selects of new requests allocated " + perRound
                    + " bytes on the caller's thread");
        }
    }

    @Test
    void aSteadyStreamOfNewRequestsThroughHostTensorsAllocatesNothing() {
        TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), TOKENS, LAYOUT.kvHeads(), LAYOUT.headSize());
        try (Arena arena = Arena.ofConfined(); KVStore store = KVStores.open("memory:?capacity=256MiB");
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(256)
                     .dropMode(DropMode.CONSUME).build()) {
            Tensor[][] from = new Tensor[LAYOUT.numLayers()][2];
            Tensor[][] to = new Tensor[LAYOUT.numLayers()][2];
            LayerSource[] sources = new LayerSource[LAYOUT.numLayers()];
            for (int l = 0; l < from.length; l++) {
                for (int t = 0; t < 2; t++) {
                    from[l][t] = Tensor.host(spec, arena.allocate(spec.byteSize(), 64));
                    to[l][t] = Tensor.host(spec, arena.allocate(spec.byteSize(), 64));
                }
                sources[l] = LayerSource.contiguous(l, from[l][0], from[l][1]);
            }
            DropTarget into = DropTarget.contiguous(to);
            InsertSession[] last = new InsertSession[1];
            long perRound = leastPerRound(r -> {
                InsertSession s = kv.beginInsert(r, last[0]);
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    s.putLayer(l, sources[l]);
                }
                s.commit();
                last[0] = s;
                requireHit(kv.dropSelect(r, into));
            });
            assertEquals(0, perRound, REQUESTS + " inserts and drop-selects of new requests allocated " + perRound
                    + " bytes on the caller's thread");
        }
    }

    private interface Round {
        void run(RequestTokens request);
    }

    /**
     * The least bytes a round of {@value #REQUESTS} new requests allocated, over several rounds after warming up: a
     * one-off (a recompilation) shows in one round only.
     */
    private static long leastPerRound(Round round) {
        SplittableRandom random = new SplittableRandom(11);
        long least = Long.MAX_VALUE;
        for (int rounds = 0; rounds < 6; rounds++) {
            RequestTokens[] requests = new RequestTokens[REQUESTS];
            for (int i = 0; i < REQUESTS; i++) {
                requests[i] = RequestTokens.of(random.ints(TOKENS, 0, 128_000).toArray());
            }
            long before = THREADS.getCurrentThreadAllocatedBytes();
            for (RequestTokens r : requests) {
                round.run(r);
            }
            long bytes = THREADS.getCurrentThreadAllocatedBytes() - before;
            if (rounds >= 2) {
                least = Math.min(least, bytes);
            }
        }
        return least;
    }

    private static void requireHit(DropResult r) {
        if (!r.isComplete()) {
            throw new AssertionError("the request came back incomplete: " + r);
        }
    }
}
