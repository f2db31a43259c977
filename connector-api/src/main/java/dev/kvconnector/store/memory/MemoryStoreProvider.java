package dev.kvconnector.store.memory;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/** Opens {@code memory:} stores. */
public final class MemoryStoreProvider implements KVStoreProvider {
    @Override
    public Set<String> schemes() {
        return Set.of("memory");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return MemoryStore.open(uri);
    }
}
