package dev.kvconnector.valkey;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.KVStoreContract;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The shared {@link KVStoreContract} over a real redis-server, one per class, with keyspace notifications on. */
class ValkeyStoreContractTest extends KVStoreContract {
    private static RedisServerProcess server;

    @BeforeAll
    static void startServer() {
        server = RedisServerProcess.start("--notify-keyspace-events", "KEA");
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
