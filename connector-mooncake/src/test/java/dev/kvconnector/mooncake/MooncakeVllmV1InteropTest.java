package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.VllmV1InteropContract;

/** vLLM V1 interop over {@code mooncake://}: the store vLLM's V1 MooncakeStoreConnector uses. */
class MooncakeVllmV1InteropTest extends VllmV1InteropContract {
    @Override
    protected KVStore openStore() {
        return MooncakeTestTarget.require().open("&staging=64MiB&staging-slots=8");
    }
}
