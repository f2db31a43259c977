package dev.kvconnector.valkey;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/**
 * Opens {@link ValkeyStore}s for {@code valkey://} URIs and their alias {@code redis://}, and for their TLS
 * forms {@code valkeys://} and {@code rediss://}; opens {@link ValkeyClusterStore}s for {@code valkey+cluster://}
 * and {@code redis+cluster://}, and over TLS {@code valkeys+cluster://} and {@code rediss+cluster://}. Found through
 * {@link java.util.ServiceLoader}.
 */
public final class ValkeyStoreProvider implements KVStoreProvider {
    /** Creates the provider; ServiceLoader calls this. */
    public ValkeyStoreProvider() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of("valkey", "redis", "valkeys", "rediss", "valkey+cluster", "redis+cluster", "valkeys+cluster",
                "rediss+cluster");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return uri.scheme().endsWith("+cluster") ? ValkeyClusterStore.open(uri) : ValkeyStore.open(uri);
    }
}
