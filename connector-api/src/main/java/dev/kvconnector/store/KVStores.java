package dev.kvconnector.store;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

/** Opens stores by URI, through the {@link KVStoreProvider}s on the class path. */
public final class KVStores {
    private KVStores() {
    }

    /**
     * Opens the store named by {@code uri}, for example {@code memory:?capacity=2GiB}.
     *
     * @throws KVException {@code UNKNOWN_STORE} when no provider handles the scheme, {@code INVALID_URI} on bad input
     */
    public static KVStore open(String uri) {
        StoreUri parsed = StoreUri.parse(uri);
        Map<String, KVStoreProvider> providers = providers();
        KVStoreProvider p = providers.get(parsed.scheme());
        if (p == null) {
            throw KVException.of(ErrorCode.UNKNOWN_STORE, "no store handles the scheme '" + parsed.scheme() + ":'")
                    .store(parsed.masked()).operation("open")
                    .hint("schemes on this class path: " + String.join(", ", providers.keySet())
                            + ". valkey://, mooncake:// and lm:// need the connector-valkey, connector-mooncake "
                            + "and connector-lmcache jars")
                    .build();
        }
        if (!parsed.nested().isEmpty() && !p.takesInnerStores()) {
            throw KVException.of(ErrorCode.INVALID_URI, parsed.scheme() + ": stores are not built over other stores, "
                            + "but the URI names " + parsed.nested().size() + " inner store URI(s) in [ ]")
                    .store(parsed.masked()).operation("open")
                    .hint("only tiered: takes [inner URIs]; write tiered:" + String.join("",
                            parsed.nested().stream().map(n -> "[" + StoreUri.maskRaw(n) + "]").toList())
                            + " for a tiered store")
                    .build();
        }
        return p.open(parsed);
    }

    /**
     * What identifies the store {@code uri} names ({@link KVStoreProvider#storeIdentity}), or null when every open
     * of it is a store of its own; for a scheme no provider handles, the default identity.
     */
    public static String storeIdentity(StoreUri uri) {
        KVStoreProvider p = providers().get(uri.scheme());
        return p != null ? p.storeIdentity(uri) : uri.scheme() + "://" + uri.hosts() + uri.path();
    }

    /** Every scheme on the class path, mapped to its provider. */
    public static Map<String, KVStoreProvider> providers() {
        Map<String, KVStoreProvider> byScheme = new TreeMap<>();
        for (KVStoreProvider p : ServiceLoader.load(KVStoreProvider.class, KVStores.class.getClassLoader())) {
            for (String s : p.schemes()) {
                byScheme.putIfAbsent(s, p);
            }
        }
        return byScheme;
    }
}
