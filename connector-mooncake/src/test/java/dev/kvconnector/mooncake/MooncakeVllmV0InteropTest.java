package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.VllmV0InteropContract;

/** vLLM V0 interop over {@code mooncake://}: the store vLLM's MooncakeStoreConnector V0 uses. */
class MooncakeVllmV0InteropTest extends VllmV0InteropContract {
    @Override
    protected KVStore openStore() {
        return MooncakeTestTarget.require().open("&staging=64MiB&staging-slots=8");
    }
}
