package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import org.junit.jupiter.api.Test;

/** The README's code example, run as written (with a smaller preset), so the README cannot rot. */
class ReadmeExampleTest {

    @Test
    void readmeInsertAndDropSelectExampleWorks() {
        KVLayout layout = KVLayout.preset("qwen2.5-0.5b");
        int[] tokenIds = new int[300];
        for (int i = 0; i < tokenIds.length; i++) {
            tokenIds[i] = 1000 + i;
        }
        try (Arena arena = Arena.ofConfined();
             PagedKVCache pagedCache = PagedKVCache.allocate(layout, 40);
             PagedKVCache myCache = PagedKVCache.allocate(layout, 40);
             KVStore store = KVStores.open("memory:?capacity=4GiB");
             KVStoreConnector kv = KVStoreConnector.builder(store, layout).modelId("Qwen/Qwen2.5-0.5B").build()) {
            for (int l = 0; l < layout.numLayers(); l++) {
                Segments.fill(pagedCache.tensor(l, 0), l);
                Segments.fill(pagedCache.tensor(l, 1), -l);
            }
            BlockTable blockTable = new BlockTable(range(0, 19), 16, 300);
            BlockTable myBlockTable = new BlockTable(range(21, 40), 16, 300);
            TensorSpec hs = TensorSpec.of(layout.dtype(), 300, layout.hiddenSize());
            Tensor hiddenStates = Tensor.host(hs, Segments.random(arena, hs.byteSize(), 5));
            Tensor myHidden = Tensor.host(hs, arena.allocate(hs.byteSize()));

            RequestTokens prompt = RequestTokens.of(tokenIds);
            try (InsertSession insert = kv.beginInsert(prompt)) {
                for (int layer = 0; layer < layout.numLayers(); layer++) {
                    insert.putLayer(layer, pagedCache, blockTable);
                }
                insert.putHidden(hiddenStates);
                insert.commit();
            }
            DropResult r = kv.dropSelect(prompt, DropTarget.paged(myCache, myBlockTable).withHidden(myHidden));

            assertTrue(r.isComplete(), r.toString());
            assertEquals(-1, hiddenStates.segment().mismatch(myHidden.segment()));
            long tb = layout.bytesPerTokenPerTensor();
            for (int t = 0; t < 300; t += 37) {
                assertEquals(-1, java.lang.foreign.MemorySegment.mismatch(pagedCache.tensor(7, 1), blockTable.slot(t) * tb,
                        blockTable.slot(t) * tb + tb, myCache.tensor(7, 1), myBlockTable.slot(t) * tb,
                        myBlockTable.slot(t) * tb + tb));
            }
            assertEquals(1, kv.metrics().hits());
        }
    }

    private static int[] range(int from, int to) {
        int[] r = new int[to - from];
        for (int i = 0; i < r.length; i++) {
            r[i] = from + i;
        }
        return r;
    }
}
