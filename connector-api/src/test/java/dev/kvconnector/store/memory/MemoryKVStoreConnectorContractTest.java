package dev.kvconnector.store.memory;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.KVStoreConnectorContract;

/** Every KVStoreConnector's contract, over a StoreConnector on memory: one connector inserts and drop-selects. */
class MemoryKVStoreConnectorContractTest extends KVStoreConnectorContract {
    private KVStore store;

    @Override
    protected Pair open(KVLayout layout, PagedKVCache destination, long layerTimeoutMillis) {
        store = KVStores.open("memory:?capacity=64MiB");
        KVStoreConnector connector = KVStoreConnector.builder(store, layout).chunkTokens(32)
                .layerTimeoutMillis(layerTimeoutMillis).build();
        return Pair.of(connector).closing(store);
    }

    @Override
    protected boolean keepsCommittedEntries() {
        return true;
    }

    @Override
    protected void corruptLayer(Pair pair, RequestTokens request, BlockTable destinationBlocks, int layer) {
        corruptStoredLayer(store, pair.consumer(), request, layer);
    }
}
