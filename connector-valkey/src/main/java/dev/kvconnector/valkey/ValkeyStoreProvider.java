package dev.kvconnector.valkey;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStoreProvider;
import dev.kvconnector.store.StoreUri;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;

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

    /**
     * The server and database, whichever alias and options name them ({@code redis://h} and {@code valkey://h:6379/0}
     * are one store); for a cluster, its seed nodes, in any order (two lists of different nodes of one cluster are not
     * told apart without connecting).
     */
    @Override
    public String storeIdentity(StoreUri uri) {
        TreeSet<String> nodes = new TreeSet<>();
        for (StoreUri.HostPort hp : uri.hosts()) {
            nodes.add(hp.host().toLowerCase(Locale.ROOT) + ":" + (hp.port() < 0 ? ValkeyStore.DEFAULT_PORT : hp.port()));
        }
        String db = uri.path().isEmpty() || uri.path().equals("/") ? "/0" : uri.path();
        return (uri.scheme().endsWith("+cluster") ? "valkey+cluster://" : "valkey://") + String.join(",", nodes) + db;
    }
}
