package dev.kvconnector.cuda;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.memory.MemoryStore;
import dev.kvconnector.testkit.DeviceConnectorContract;

/** The device path of the connector over the {@code memory:} store (puts on the caller's thread, or I/O threads). */
class CudaDeviceMemoryConnectorTest extends DeviceConnectorContract {
    @Override
    protected KVStore openStore() {
        return MemoryStore.withCapacity(256L << 20);
    }
}
