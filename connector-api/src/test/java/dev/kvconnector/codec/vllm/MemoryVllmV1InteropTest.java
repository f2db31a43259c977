package dev.kvconnector.codec.vllm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.VllmV1InteropContract;

/** vLLM V1 interop over {@code memory:}. */
class MemoryVllmV1InteropTest extends VllmV1InteropContract {
    @Override
    protected KVStore openStore() {
        return KVStores.open("memory:?capacity=16MiB");
    }
}
