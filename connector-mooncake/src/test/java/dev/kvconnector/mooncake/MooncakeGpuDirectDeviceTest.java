package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.cuda.CudaRuntime;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.testkit.DeviceConnectorContract;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;

/**
 * The connector's device path over {@code mooncake://} with {@code gpu-direct=true}: device staging buffers are
 * registered with Mooncake ({@code register_buffer} on the device address) and layers are put from and got into
 * them without a host copy. The Mooncake test double is as strict as RDMA (an unregistered buffer fails with -800),
 * so a device buffer the connector forgot to register fails these tests.
 *
 * <p>Against the Mooncake double the CUDA driver must be the CUDA test double too (the surefire configuration sets
 * it): the Mooncake double reads the "device" address with the CPU, which real device memory would not survive.
 */
class MooncakeGpuDirectDeviceTest extends DeviceConnectorContract {
    private MooncakeTestTarget target;

    @BeforeEach
    void requireCompatibleDrivers() {
        target = MooncakeTestTarget.require();
        if (target.isDouble()) {
            Assumptions.assumeTrue(CudaRuntime.probe().devices().getFirst().name().contains("TEST DOUBLE"),
                    "the Mooncake test double cannot read real GPU memory: run with the CUDA driver test double, or "
                            + "against a real libmooncake_store.so built with USE_CUDA");
        }
    }

    @Override
    protected KVStore openStore() {
        MooncakeStore store = target.open("gpu-direct=true&lease-policy=force&staging=8MiB");
        assertTrue(store.capabilities().contains(StoreCapability.DEVICE_MEMORY));
        return store;
    }

    /**
     * The connector registered device buffers that hold a whole layer: its host staging, the only other memory it
     * registers here, only ever holds headers and slot mappings (a 4 KiB class) on this path.
     */
    @Override
    protected void afterDeviceInsert(KVStore store, long layerPayloadBytes) {
        long registered = ((MooncakeStore) store).callerRegisteredBytes();
        assertTrue(registered >= layerPayloadBytes, "registered " + registered + " bytes, less than one layer's "
                + layerPayloadBytes + ": the device buffers were not registered");
    }
}
