package dev.kvconnector.store.memory;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.ConnectorContract;

/** The connector suite over a small {@code memory:} store that refuses instead of evicting, to exercise STORE_FULL. */
class MemoryRefusingConnectorContractTest extends ConnectorContract {
    @Override
    protected KVStore openStore() {
        return KVStores.open("memory:?capacity=1MiB&eviction=refuse");
    }

    @Override
    protected long freeBytes() {
        return ((MemoryStore) store).capacity() - ((MemoryStore) store).usedBytes();
    }
}
