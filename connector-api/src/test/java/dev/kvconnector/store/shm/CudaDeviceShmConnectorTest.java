package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.DeviceConnectorContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The connector's device path over a fresh {@code shm:} store file per store. */
class CudaDeviceShmConnectorTest extends DeviceConnectorContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();

    @Override
    protected KVStore openStore() {
        return DIR.openFresh("device", "capacity=64MiB");
    }
}
