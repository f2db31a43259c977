package dev.kvconnector.store.memory;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.KVStoreContract;

class MemoryStoreContractTest extends KVStoreContract {
    @Override
    protected KVStore openStore() {
        return KVStores.open("memory:?capacity=256MiB");
    }
}
