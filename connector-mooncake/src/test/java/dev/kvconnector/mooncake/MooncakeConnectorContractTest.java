package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.ConnectorContract;

/** The shared connector contract over the mooncake:// store (test double by default, real store when configured). */
class MooncakeConnectorContractTest extends ConnectorContract {
    @Override
    protected KVStore openStore() {
        MooncakeTestTarget target = MooncakeTestTarget.require();
        return target.open("&staging=64MiB&staging-slots=8");
    }
}
