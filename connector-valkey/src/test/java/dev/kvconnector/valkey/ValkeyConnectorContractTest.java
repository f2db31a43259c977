package dev.kvconnector.valkey;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.ConnectorContract;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The shared {@link ConnectorContract} over a real redis-server, one per class. */
class ValkeyConnectorContractTest extends ConnectorContract {
    private static RedisServerProcess server;

    @BeforeAll
    static void startServer() {
        server = RedisServerProcess.start();
    }

    @AfterAll
    static void stopServer() {
        if (server != null) {
            server.close();
        }
    }

    @Override
    protected KVStore openStore() {
        return KVStores.open("valkey://" + server.hostPort() + "?pool=4");
    }
}
