package dev.kvconnector.mooncake;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/** Opens {@code mooncake://} stores; registered for {@link java.util.ServiceLoader}. */
public final class MooncakeStoreProvider implements KVStoreProvider {
    /** The URI scheme. */
    public static final String SCHEME = "mooncake";

    /** For {@link java.util.ServiceLoader}. */
    public MooncakeStoreProvider() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of(SCHEME);
    }

    @Override
    public KVStore open(StoreUri uri) {
        return MooncakeStore.open(uri, System.getenv());
    }
}
