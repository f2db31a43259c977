package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** A full staging pool is back-pressure for a drop-select: it waits, then misses with a reason; it does not throw. */
class DropStagingTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int TOKENS = 64;

    @Test
    void aDropSelectThatFindsTheStagingPoolFullWaitsThenMissesNamingThePoolAndSucceedsOnceItIsFree() {
        // Neither CLAIM nor VIEW: the layers go through staging.
        CountingStoreTestDouble store = new CountingStoreTestDouble(KVStores.open("memory:?capacity=256MiB"),
                EnumSet.of(StoreCapability.REMOVE, StoreCapability.LOCAL_MEMORY));
        RequestTokens prompt = RequestTokens.of(IntStream.range(0, TOKENS).map(i -> 7 + i).toArray());
        BlockTable table = new BlockTable(new int[] {0, 1, 2, 3}, 16, TOKENS);
        try (store;
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 4);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 4);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).stagingBytes(8L << 20)
                     .layerTimeoutMillis(200).dropMode(DropMode.RETAIN).build()) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                Segments.fill(source.tensor(l, 0), l);
                Segments.fill(source.tensor(l, 1), 50 + l);
            }
            try (InsertSession s = kv.beginInsert(prompt)) {
                s.putLayers(LayerSource.paged(source, table));
                s.commit();
            }
            // Lease the whole bound, then every idle segment (a small lease takes a larger idle one when full).
            List<MemorySegment> held = new ArrayList<>();
            for (long bytes : new long[] {64 << 10, 1}) {
                MemorySegment lease;
                while ((lease = kv.staging().tryAcquire(bytes)) != null) {
                    held.add(lease);
                }
            }
            long start = System.nanoTime();
            DropResult full = kv.dropSelect(prompt, DropTarget.paged(target, table));
            long waitedMillis = (System.nanoTime() - start) / 1_000_000;
            assertEquals(0, full.matchedTokens(), full.toString());
            assertEquals(MissReason.TIMED_OUT, full.reason());
            assertTrue(full.detail().contains("staging pool exhausted") && full.detail().contains("200 ms"),
                    full.detail());
            assertTrue(waitedMillis >= 150, "it gave up after " + waitedMillis + " ms, not at the layer timeout");

            held.forEach(kv.staging()::release);
            DropResult r = kv.dropSelect(prompt, DropTarget.paged(target, table));
            assertTrue(r.isComplete(), r.toString());
            long bytes = TOKENS * LAYOUT.bytesPerTokenPerTensor();
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                assertEquals(-1, MemorySegment.mismatch(source.tensor(l, 1), 0, bytes, target.tensor(l, 1), 0, bytes));
            }
        }
    }
}
