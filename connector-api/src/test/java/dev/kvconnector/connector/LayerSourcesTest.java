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
import java.lang.foreign.Arena;
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
    void aDropTargetNeedsASink() {
        KVException e = assertThrows(KVException.class, () -> DropTarget.of(null));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }
}
