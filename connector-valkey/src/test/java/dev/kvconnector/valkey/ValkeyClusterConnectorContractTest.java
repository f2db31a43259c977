package dev.kvconnector.valkey;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.ConnectorContract;
import dev.kvconnector.valkey.testing.RedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The shared {@link ConnectorContract} over a real 3-master cluster. */
class ValkeyClusterConnectorContractTest extends ConnectorContract {
    private static RedisCluster cluster;

    @BeforeAll
    static void startCluster() {
        cluster = RedisCluster.start(3);
    }

    @AfterAll
    static void stopCluster() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Override
    protected KVStore openStore() {
        return KVStores.open("valkey+cluster://" + cluster.seeds() + "?pool=2");
    }
}
