package dev.kvconnector.store;

import java.util.Set;

/**
 * Opens stores for URI schemes; found through {@link java.util.ServiceLoader}. Register an implementation in
 * {@code META-INF/services/dev.kvconnector.store.KVStoreProvider}.
 */
public interface KVStoreProvider {
    /** The URI schemes handled, such as {@code memory} or {@code valkey}. */
    Set<String> schemes();

    /** Opens a store; invalid options are an {@code INVALID_URI} error that names the option. */
    KVStore open(StoreUri uri);

    /**
     * What identifies the store that {@code uri} names, without opening it, so that a store over other stores can
     * refuse one store named twice: two URIs of this provider with equal identities name the same store, whatever
     * options that do not pick the store they differ in; null means every open makes a store of its own
     * ({@code memory:}). By default the scheme, the hosts and the path.
     */
    default String storeIdentity(StoreUri uri) {
        return uri.scheme() + "://" + uri.hosts() + uri.path();
    }

    /**
     * Whether this provider's stores are built over other stores, named as bracketed inner URIs
     * ({@link StoreUri#nested()}, as in {@code tiered:[shm:/kv][valkey://h:6379]}). {@link KVStores#open} refuses
     * inner URIs for every other provider, so that they are never silently ignored.
     */
    default boolean takesInnerStores() {
        return false;
    }
}
