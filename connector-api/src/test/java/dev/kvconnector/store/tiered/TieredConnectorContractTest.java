package dev.kvconnector.store.tiered;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.ConnectorContract;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.io.TempDir;

/** The shared connector contract over a tiered store: shm: in front of memory:, written back. */
class TieredConnectorContractTest extends ConnectorContract {
    @TempDir
    static Path dir;

    @Override
    protected KVStore openStore() {
        return KVStores.open("tiered:[shm:/tiered-" + UUID.randomUUID() + "?capacity=512MiB&dir=" + dir
                + "][memory:?capacity=512MiB]?write=back");
    }
}
