package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.testkit.DeviceConnectorContract;

/**
 * The connector's device path over {@code mooncake://} with {@code gpu-direct=false} (the default over TCP): device
 * KV is copied through the connector's pinned host staging, which is registered with Mooncake as usual.
 */
class MooncakeStagedDeviceTest extends DeviceConnectorContract {
    @Override
    protected KVStore openStore() {
        MooncakeStore store = MooncakeTestTarget.require().open("lease-policy=force&staging=8MiB");
        assertFalse(store.capabilities().contains(StoreCapability.DEVICE_MEMORY));
        return store;
    }
}
