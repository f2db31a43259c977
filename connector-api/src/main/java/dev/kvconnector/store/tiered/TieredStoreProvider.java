package dev.kvconnector.store.tiered;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Set;

/** Opens {@code tiered:} stores. */
public final class TieredStoreProvider implements KVStoreProvider {
    @Override
    public Set<String> schemes() {
        return Set.of("tiered");
    }

    @Override
    public KVStore open(StoreUri uri) {
        return TieredStore.open(uri);
    }

    @Override
    public boolean takesInnerStores() {
        return true;
    }
}
