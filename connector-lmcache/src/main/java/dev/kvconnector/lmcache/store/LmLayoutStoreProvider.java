package dev.kvconnector.lmcache.store;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/**
 * Opens the LMCache layouts over other stores: {@code lmcache+valkey://} and its variants
 * ({@link LmValkeyLayoutStore}) and {@code lmcache+mooncake://} ({@link LmMooncakeLayoutStore}). Registered for
 * {@link java.util.ServiceLoader}.
 */
public final class LmLayoutStoreProvider implements KVStoreProvider {
    /** For {@link java.util.ServiceLoader}. */
    public LmLayoutStoreProvider() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of("lmcache+valkey", "lmcache+redis", "lmcache+valkeys", "lmcache+rediss",
                "lmcache+valkey+cluster", "lmcache+redis+cluster", "lmcache+mooncake");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return "mooncake".equals(InnerStoreUri.innerScheme(uri)) ? LmMooncakeLayoutStore.open(uri)
                : LmValkeyLayoutStore.open(uri);
    }
}
