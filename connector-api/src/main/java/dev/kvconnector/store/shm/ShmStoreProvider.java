package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.nio.file.Path;
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

    /** The store file: its directory ({@code dir=}, made absolute) and name; the sizes and settings do not count. */
    @Override
    public String storeIdentity(StoreUri uri) {
        String name = uri.path().startsWith("/") ? uri.path().substring(1) : uri.path();
        Path dir = Path.of(uri.param("dir") == null ? ShmStore.DEFAULT_DIR : uri.param("dir"));
        return "shm:" + dir.toAbsolutePath().normalize().resolve(name);
    }
}
