package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.testkit.ConnectorContract;
import java.io.IOException;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The connector contract over a small shm: store that refuses instead of evicting, to exercise STORE_FULL. */
class ShmRefusingConnectorContractTest extends ConnectorContract {
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
        return new ShmStoreProvider().open(StoreUri.parse("shm:/refusing-" + UUID.randomUUID()
                + "?capacity=1MiB&eviction=refuse&dir=" + dir));
    }

    @Override
    protected long freeBytes() {
        return ((ShmStore) store).freeBytes();
    }
}
