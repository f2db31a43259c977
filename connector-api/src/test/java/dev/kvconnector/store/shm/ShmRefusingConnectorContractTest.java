package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.ConnectorContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The connector contract over a small shm: store that refuses instead of evicting, to exercise STORE_FULL. */
class ShmRefusingConnectorContractTest extends ConnectorContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();

    @Override
    protected KVStore openStore() {
        return DIR.openFresh("refusing", "capacity=1MiB&eviction=refuse");
    }

    @Override
    protected long freeBytes() {
        return ((ShmStore) store).freeBytes();
    }
}
