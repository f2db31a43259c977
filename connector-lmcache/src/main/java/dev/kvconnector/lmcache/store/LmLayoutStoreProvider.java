package dev.kvconnector.lmcache.store;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/**
 * Opens the LMCache layouts over other stores: {@code lmcache+valkey://} and its variants
 * ({@link LmValkeyLayoutStore}), {@code lmcache+mooncake://} ({@link LmMooncakeLayoutStore}) and {@code lmcache+lm://}
 * ({@link LmServerLayoutStore}). Registered for
 * {@link java.util.ServiceLoader}.
 */
public final class LmLayoutStoreProvider implements KVStoreProvider {
    /** For {@link java.util.ServiceLoader}. */
    public LmLayoutStoreProvider() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of("lmcache+valkey", "lmcache+redis", "lmcache+valkeys", "lmcache+rediss",
                "lmcache+valkey+cluster", "lmcache+redis+cluster", "lmcache+mooncake", "lmcache+lm");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return switch (InnerStoreUri.innerScheme(uri)) {
            case "mooncake" -> LmMooncakeLayoutStore.open(uri);
            case "lm" -> LmServerLayoutStore.open(uri);
            default -> LmValkeyLayoutStore.open(uri);
        };
    }
}
