package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/** Opens {@code shm:/NAME?capacity=...} stores; see {@link ShmStore} for the options. */
public final class ShmStoreProvider implements KVStoreProvider {
    @Override
    public Set<String> schemes() {
        return Set.of("shm");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return ShmStore.open(uri);
    }
}
