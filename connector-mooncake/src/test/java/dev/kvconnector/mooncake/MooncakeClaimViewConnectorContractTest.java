package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.ConnectorContract;

/** The shared connector contract over mooncake:// with {@code claim-view=true}: inserts claim, drops view. */
class MooncakeClaimViewConnectorContractTest extends ConnectorContract {
    @Override
    protected KVStore openStore() {
        return MooncakeTestTarget.require().open("&staging=64MiB&staging-slots=8&claim-view=true");
    }
}
