package dev.kvconnector.mooncake;

import java.util.Map;

/**
 * Finds {@code libmooncake_store.so}, in this order: the URI's {@code library=} option; the environment variable
 * {@value #ENV_LIBRARY}; each directory of {@code java.library.path}; the dynamic linker's own search
 * ({@code LD_LIBRARY_PATH}, {@code ld.so.cache}). The first two name a file that must exist: a wrong path is an error,
 * never a silent fall-through to another library.
 */
public final class MooncakeLibraryLocator {
    /** The environment variable that names the library file. */
    public static final String ENV_LIBRARY = "MOONCAKE_STORE_LIB";
    /** The library's base name, as {@code System.loadLibrary} takes it. */
    public static final String LIBRARY_NAME = "mooncake_store";

    static final String BUILD_HINT = "Mooncake's pip wheel does not ship this library: build it from Mooncake's sources "
            + "with 'cmake -DWITH_STORE_C_SHARED=ON -DBUILD_SHARED_LIBS=OFF .. && make', then set library= in the "
            + "URI or MOONCAKE_STORE_LIB to the built libmooncake_store.so";

    private static final NativeLibrarySearch SEARCH = new NativeLibrarySearch(ENV_LIBRARY, LIBRARY_NAME,
            "the Mooncake store library", BUILD_HINT);

    private MooncakeLibraryLocator() {
    }

    /**
     * Locates the library, as {@link NativeLibrarySearch#locate} says.
     *
     * @throws dev.kvconnector.error.KVException {@code NATIVE_LIBRARY_MISSING} naming every place searched
     */
    public static MooncakeLibraryLocation locate(String uriLibrary, Map<String, String> env, String javaLibraryPath,
                                                 String maskedUri) {
        return SEARCH.locate(uriLibrary, env, javaLibraryPath, maskedUri);
    }
}
