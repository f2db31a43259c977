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
     * Whether this provider's stores are built over other stores, named as bracketed inner URIs
     * ({@link StoreUri#nested()}, as in {@code tiered:[shm:/kv][valkey://h:6379]}). {@link KVStores#open} refuses
     * inner URIs for every other provider, so that they are never silently ignored.
     */
    default boolean takesInnerStores() {
        return false;
    }
}
