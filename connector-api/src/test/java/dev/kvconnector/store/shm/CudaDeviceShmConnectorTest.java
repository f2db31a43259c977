package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.testkit.DeviceConnectorContract;
import java.io.IOException;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The connector's device path over a fresh {@code shm:} store file per store. */
class CudaDeviceShmConnectorTest extends DeviceConnectorContract {
    private static Path dir;

    @BeforeAll
    static void makeDir() throws IOException {
        dir = ShmTestFiles.newDir();
    }

    @AfterAll
    static void deleteDir() throws IOException {
        ShmTestFiles.delete(dir);
    }

    @Override
    protected KVStore openStore() {
        return new ShmStoreProvider().open(StoreUri.parse("shm:/device-" + UUID.randomUUID() + "?capacity=64MiB&dir="
                + dir));
    }
}
