package dev.kvconnector.store.tiered;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.testkit.KVStoreContract;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.io.TempDir;

/** The shared KVStore contract over tiered stores: memory: over shm:, written through and written back. */
class TieredStoreContractTest {
    @TempDir
    static Path dir;

    static String shm() {
        return "shm:/tiered-" + UUID.randomUUID() + "?capacity=64MiB&dir=" + dir;
    }

    @Nested
    class WriteThrough extends KVStoreContract {
        @Override
        protected KVStore openStore() {
            return KVStores.open("tiered:[memory:?capacity=64MiB][" + shm() + "]");
        }
    }

    @Nested
    class WriteBack extends KVStoreContract {
        @Override
        protected KVStore openStore() {
            return KVStores.open("tiered:[memory:?capacity=64MiB][" + shm() + "]?write=back");
        }
    }

    @Nested
    class ShmFirst extends KVStoreContract {
        @Override
        protected KVStore openStore() {
            return KVStores.open("tiered:[" + shm() + "][memory:?capacity=64MiB]?write=back&promote=never");
        }
    }
}
