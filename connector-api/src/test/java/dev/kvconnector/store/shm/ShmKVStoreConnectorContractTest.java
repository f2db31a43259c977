package dev.kvconnector.store.shm;

import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.KVStoreConnectorContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Every KVStoreConnector's contract, over a StoreConnector on a fresh shm: store file per case. */
class ShmKVStoreConnectorContractTest extends KVStoreConnectorContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();
    private KVStore store;

    @Override
    protected Pair open(KVLayout layout, PagedKVCache destination, long layerTimeoutMillis) {
        store = DIR.openFresh("connector-contract", "capacity=64MiB");
        return Pair.of(KVStoreConnector.builder(store, layout).layerTimeoutMillis(layerTimeoutMillis).build())
                .closing(store);
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
