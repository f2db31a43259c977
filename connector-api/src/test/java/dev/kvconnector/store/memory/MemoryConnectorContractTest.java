package dev.kvconnector.store.memory;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.ConnectorContract;

class MemoryConnectorContractTest extends ConnectorContract {
    @Override
    protected KVStore openStore() {
        return KVStores.open("memory:?capacity=512MiB");
    }
}
