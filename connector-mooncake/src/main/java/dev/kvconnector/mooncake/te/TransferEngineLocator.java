package dev.kvconnector.mooncake.te;

import dev.kvconnector.mooncake.MooncakeLibraryLocation;
import dev.kvconnector.mooncake.NativeLibrarySearch;
import java.util.Map;

/**
 * Finds the transfer engine's shared library, in this order: the URI's {@code library=} option; the environment
 * variable {@value #ENV_LIBRARY}; each directory of {@code java.library.path}; the dynamic linker's own search
 * for {@code libtransfer_engine.so}. The first two name a file that must exist: a wrong path is an error, never a
 * silent fall-through to another library.
 */
public final class TransferEngineLocator {
    /** The environment variable that names the library file. */
    public static final String ENV_LIBRARY = "MOONCAKE_TE_LIB";
    /** The library's base name, as {@code System.loadLibrary} takes it. */
    public static final String LIBRARY_NAME = "transfer_engine";

    static final String BUILD_HINT = "Mooncake builds its transfer engine as a static archive "
            + "(libtransfer_engine.a): link it into a shared object (gcc -shared -Wl,--whole-archive "
            + "libtransfer_engine.a -Wl,--no-whole-archive plus its dependencies), or build Mooncake with "
            + "-DBUILD_SHARED_LIBS=ON; then set library= in the URI or MOONCAKE_TE_LIB to that .so "
            + "(tests use native/target/lib/libmooncake_te_double.so, a test double)";

    private static final NativeLibrarySearch SEARCH = new NativeLibrarySearch(ENV_LIBRARY, LIBRARY_NAME,
            "the Mooncake transfer engine library", BUILD_HINT);

    private TransferEngineLocator() {
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
