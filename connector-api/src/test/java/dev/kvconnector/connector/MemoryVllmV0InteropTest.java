package dev.kvconnector.connector;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.VllmV0InteropContract;

class MemoryVllmV0InteropTest extends VllmV0InteropContract {
    @Override
    protected KVStore openStore() {
        return KVStores.open("memory:?capacity=64MiB");
    }
}
