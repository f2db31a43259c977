package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.ConnectorContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The shared Connector contract, against a fresh shm: store file per test. */
class ShmConnectorContractTest extends ConnectorContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();

    @Override
    protected KVStore openStore() {
        return DIR.openFresh("contract", "capacity=256MiB");
    }
}
