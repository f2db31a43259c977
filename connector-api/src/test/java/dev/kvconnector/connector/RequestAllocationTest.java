package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.util.function.LongSupplier;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * What the connector allocates on the caller's thread for a steady stream of requests of content never stored before
 * over {@code memory:} (claims and views, every key new), with each insert begun in the session of the one before and
 * whole-request drop-selects: nothing per request (less than a byte a request on average, where one object is 16
 * or more; a round is 0 bytes in a quiet JVM, and a recompilation in the suite may allocate a few bytes in every round
 * there); with layer-wise drop-selects, each begun in the session of the last, nothing but the JDK's wait nodes on
 * the I/O threads. A request here has 4 chunks and 24 layers, so 104 objects and keys.
 */
class RequestAllocationTest {
    private static final ThreadMXBean THREADS = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int TOKENS = 1024;
    private static final int REQUESTS = 200;
    /** Bytes per request that the connector's I/O threads may allocate waiting for work (the JDK's queue). */
    private static final long IDLE_WAIT_BYTES = 128;

    @Test
    void aSteadyStreamOfNewRequestsThroughPagedCachesAllocatesNoObjectPerRequest() {
        try (KVStore store = KVStores.open("memory:?capacity=256MiB"); KVStoreConnector kv = connector(store);
             PagedKVCache source = cache(); PagedKVCache target = cache()) {
            int[] blocks = new int[TOKENS / LAYOUT.blockSize()];
            for (int i = 0; i < blocks.length; i++) {
                blocks[i] = blocks.length - 1 - i;
            }
            BlockTable table = new BlockTable(blocks, LAYOUT.blockSize(), TOKENS);
            assertNoObjectPerRequest(kv, DropTarget.paged(target, table), (s, l) -> s.putLayer(l, source, table));
        }
    }

    @Test
    void aSteadyStreamOfNewRequestsThroughHostTensorsAllocatesNoObjectPerRequest() {
        TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), TOKENS, LAYOUT.kvHeads(), LAYOUT.headSize());
        try (Arena arena = Arena.ofConfined(); KVStore store = KVStores.open("memory:?capacity=256MiB");
             KVStoreConnector kv = connector(store)) {
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
            assertNoObjectPerRequest(kv, DropTarget.contiguous(to), (s, l) -> s.putLayer(l, sources[l]));
        }
    }

    @Test
    void aSteadyStreamOfLayerWiseDropSelectsAllocatesOnlyTheIoThreadsIdleWaits() {
        try (KVStore store = KVStores.open("memory:?capacity=256MiB"); KVStoreConnector kv = connector(store);
             PagedKVCache source = cache(); PagedKVCache target = cache()) {
            BlockTable table = new BlockTable(IntStream.range(0, TOKENS / LAYOUT.blockSize()).toArray(),
                    LAYOUT.blockSize(), TOKENS);
            DropTarget into = DropTarget.paged(target, table);
            InsertSession[] lastInsert = new InsertSession[1];
            DropSession[] lastDrop = new DropSession[1];
            // The load runs on the connector's I/O thread: count every thread's bytes, the caller's included.
            long perRound = leastPerRound(THREADS::getTotalThreadAllocatedBytes, r -> {
                DropSession drop = kv.beginDropSelect(r, into, lastDrop[0]);
                InsertSession s = kv.beginInsert(r, lastInsert[0]);
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    s.putLayer(l, source, table);
                }
                s.commit();
                lastInsert[0] = s;
                requireHit(drop.result());
                lastDrop[0] = drop;
            });
            // What remains is the JDK's: an idle I/O thread that waits for the next load in ArrayBlockingQueue.take
            // makes a condition node each time (JFR: about 60 bytes a request). A session or plan per request is
            // about 2 KB, and fails this.
            assertTrue(perRound <= REQUESTS * IDLE_WAIT_BYTES, REQUESTS + " inserts and layer-wise drop-selects of new "
                    + "requests allocated " + perRound + " bytes on all threads");
        }
    }

    /** A consuming connector over {@code store} with 4 chunks of 256 tokens per request. */
    private static KVStoreConnector connector(KVStore store) {
        return KVStoreConnector.builder(store, LAYOUT).chunkTokens(256).dropMode(DropMode.CONSUME).build();
    }

    /** A paged cache with room for one request. */
    private static PagedKVCache cache() {
        return PagedKVCache.allocate(LAYOUT, TOKENS / LAYOUT.blockSize());
    }

    private interface LayerPut {
        void put(InsertSession insert, int layer);
    }

    /**
     * Inserts rounds of new requests, each in the session of the one before, through {@code put}, and drop-selects
     * each whole into {@code into}: less than a byte per request on the caller's thread, so no object per request.
     */
    private static void assertNoObjectPerRequest(KVStoreConnector kv, DropTarget into, LayerPut put) {
        InsertSession[] last = new InsertSession[1];
        long perRound = leastPerRound(THREADS::getCurrentThreadAllocatedBytes, r -> {
            InsertSession s = kv.beginInsert(r, last[0]);
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                put.put(s, l);
            }
            s.commit();
            last[0] = s;
            requireHit(kv.dropSelect(r, into));
        });
        assertTrue(perRound < REQUESTS, REQUESTS + " inserts and drop-selects of new requests allocated " + perRound
                + " bytes on the caller's thread, which is an object per request");
    }

    private interface Round {
        void run(RequestTokens request);
    }

    /**
     * The least bytes a round of {@value #REQUESTS} new requests allocated, over several rounds after warming up: a
     * one-off (a recompilation) shows in one round only.
     */
    private static long leastPerRound(LongSupplier allocated, Round round) {
        SplittableRandom random = new SplittableRandom(11);
        long least = Long.MAX_VALUE;
        for (int rounds = 0; rounds < 8; rounds++) {
            RequestTokens[] requests = new RequestTokens[REQUESTS];
            for (int i = 0; i < REQUESTS; i++) {
                requests[i] = RequestTokens.of(random.ints(TOKENS, 0, 128_000).toArray());
            }
            long before = allocated.getAsLong();
            for (RequestTokens r : requests) {
                round.run(r);
            }
            long bytes = allocated.getAsLong() - before;
            if (rounds >= 3) {
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
