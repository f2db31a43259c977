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
}
