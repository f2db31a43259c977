package dev.kvconnector.lmcache.client;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/** Opens {@code lm://host:port} stores ({@link LmStore}); registered for {@link java.util.ServiceLoader}. */
public final class LmStoreProvider implements KVStoreProvider {
    @Override
    public Set<String> schemes() {
        return Set.of("lm");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return new LmStore(uri);
    }
}
