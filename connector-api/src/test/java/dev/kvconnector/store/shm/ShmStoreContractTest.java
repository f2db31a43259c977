package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.KVStoreContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The shared KVStore contract, against a fresh shm: store file per test. */
class ShmStoreContractTest extends KVStoreContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();

    @Override
    protected KVStore openStore() {
        return DIR.openFresh("contract", "capacity=64MiB");
    }
}
