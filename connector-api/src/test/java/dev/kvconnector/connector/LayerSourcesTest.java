package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
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
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/** The checks of sources and sinks, made once per call, and their misuse. */
class LayerSourcesTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");

    @Test
    void oneLayersTensorsCannotStandForEveryLayer() {
        TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), 20, LAYOUT.kvHeads(), LAYOUT.headSize());
        try (Arena arena = Arena.ofConfined(); KVStore store = KVStores.open("memory:?capacity=64MiB");
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).build();
             InsertSession insert = kv.beginInsert(RequestTokens.of(new int[20]))) {
            Tensor k = Tensor.host(spec, arena.allocate(spec.byteSize()));
            KVException e = assertThrows(KVException.class, () -> insert.putLayers(LayerSource.contiguous(3, k, k)));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("layer 3's"), e.getMessage());
        }
    }

    @Test
    void aPagedSourceAndSinkCheckTheLayoutAndTheSlotsOnce() {
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             PagedKVCache other = PagedKVCache.allocate(KVLayout.preset("llama3-8b"), 2);
             PagedKVCache small = PagedKVCache.allocate(LAYOUT, 2);
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).build();
             InsertSession insert = kv.beginInsert(RequestTokens.of(new int[40]))) {
            BlockTable two = new BlockTable(new int[] {0, 1}, 16, 32);
            KVException e = assertThrows(KVException.class, () -> insert.putLayer(0, other, two));
            assertEquals(ErrorCode.SHAPE_MISMATCH, e.code());
            assertTrue(e.getMessage().contains("paged cache layout"), e.getMessage());
            e = assertThrows(KVException.class, () -> insert.putLayer(0, small, two));
            assertTrue(e.getMessage().contains("slots cover 32 tokens, the request has 40"), e.getMessage());
            e = assertThrows(KVException.class, () -> kv.dropSelect(RequestTokens.of(new int[40]),
                    DropTarget.paged(small, two)));
            assertTrue(e.getMessage().contains("slots cover 32 tokens, the request has 40")
                    && e.getMessage().contains("memory:"), e.getMessage());
        }
    }

    @Test
    void eachPagedPutLayerReadsThroughTheCacheAndSlotsItNames() {
        int tokens = 40;
        try (Arena arena = Arena.ofConfined(); KVStore store = KVStores.open("memory:?capacity=64MiB");
             PagedKVCache cache = PagedKVCache.allocate(LAYOUT, 8);
             PagedKVCache second = PagedKVCache.allocate(LAYOUT, 8);
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).build()) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    Segments.fill(cache.tensor(l, t), 100L * l + t);
                    Segments.fill(second.tensor(l, t), 7_000L + 100L * l + t);
                }
            }
            BlockTable a = new BlockTable(new int[] {0, 1, 2}, 16, tokens);
            BlockTable b = new BlockTable(new int[] {5, 3, 7}, 16, tokens);
            RequestTokens request = RequestTokens.of(new int[tokens]);
            PagedKVCache[] caches = new PagedKVCache[LAYOUT.numLayers()];
            BlockTable[] tables = new BlockTable[LAYOUT.numLayers()];
            try (InsertSession insert = kv.beginInsert(request)) {
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    // Other slots, then the same slots again, then another cache with the first slots.
                    tables[l] = l % 3 == 1 ? b : a;
                    caches[l] = l % 4 == 3 ? second : cache;
                    insert.putLayer(l, caches[l], tables[l]);
                }
                insert.commit();
            }
            TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), tokens, LAYOUT.kvHeads(), LAYOUT.headSize());
            Tensor[][] got = new Tensor[LAYOUT.numLayers()][LAYOUT.tensorsPerLayer()];
            for (Tensor[] layer : got) {
                for (int t = 0; t < layer.length; t++) {
                    layer[t] = Tensor.host(spec, arena.allocate(spec.byteSize()));
                }
            }
            assertTrue(kv.dropSelect(request, DropTarget.contiguous(got)).isComplete());
            MemorySegment expected = arena.allocate(spec.byteSize());
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    caches[l].gather(l, t, tables[l], 0, tokens, expected, 0);
                    assertTrue(Segments.equal(expected, got[l][t].segment(), spec.byteSize()),
                            "layer " + l + " tensor " + t + " is not what its own cache and slots hold");
                }
            }
        }
    }

    @Test
    void aDropTargetNeedsASink() {
        KVException e = assertThrows(KVException.class, () -> DropTarget.of(null));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }
}
