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

    /** None: every open of {@code memory:} is a store of its own, whatever its options. */
    @Override
    public String storeIdentity(StoreUri uri) {
        return null;
    }
}
