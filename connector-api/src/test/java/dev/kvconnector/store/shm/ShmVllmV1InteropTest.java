package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.VllmV1InteropContract;
import org.junit.jupiter.api.extension.RegisterExtension;

/** vLLM V1 interop over {@code shm:}, through its claims and views. */
class ShmVllmV1InteropTest extends VllmV1InteropContract {
    @RegisterExtension
    static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();

    @Override
    protected KVStore openStore() {
        return DIR.openFresh("vllm-v1", "capacity=16MiB");
    }
}
