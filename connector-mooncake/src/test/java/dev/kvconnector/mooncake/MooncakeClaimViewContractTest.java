package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.testkit.KVStoreContract;

/** The shared KVStore contract over mooncake:// with {@code claim-view=true}, so its claim and view cases run. */
class MooncakeClaimViewContractTest extends KVStoreContract {
    @Override
    protected KVStore openStore() {
        return MooncakeTestTarget.require().open("&staging=64MiB&staging-slots=8&claim-view=true");
    }
}
