package dev.kvconnector.mooncake;

import java.nio.file.Path;

/**
 * Where a {@code libmooncake_store.so} was found.
 *
 * @param path the library file, or null when the dynamic linker found it by name
 * @param name the name given to the dynamic linker when {@code path} is null, such as {@code libmooncake_store.so}
 * @param source how it was found: {@code library= option}, {@code MOONCAKE_STORE_LIB}, {@code java.library.path}
 *     or {@code system library path}
 */
public record MooncakeLibraryLocation(Path path, String name, String source) {
    /** A stable key for caching one binding per library. */
    public String cacheKey() {
        return path != null ? path.toAbsolutePath().normalize().toString() : "dlopen:" + name;
    }

    @Override
    public String toString() {
        return (path != null ? path.toString() : name) + " (from " + source + ")";
    }
}
