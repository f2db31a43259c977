package dev.kvconnector.mooncake;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.File;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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

    private MooncakeLibraryLocator() {
    }

    /**
     * Locates the library.
     *
     * @param uriLibrary the {@code library=} option, or null
     * @param env the environment (normally {@code System.getenv()})
     * @param javaLibraryPath the value of {@code java.library.path}, or null
     * @param maskedUri the store URI for error messages
     * @throws KVException {@code NATIVE_LIBRARY_MISSING} naming every place searched
     */
    public static MooncakeLibraryLocation locate(String uriLibrary, Map<String, String> env, String javaLibraryPath,
                                                 String maskedUri) {
        if (uriLibrary != null && !uriLibrary.isBlank()) {
            return requireFile(Path.of(uriLibrary.trim()), "library= option", maskedUri);
        }
        String fromEnv = env.get(ENV_LIBRARY);
        if (fromEnv != null && !fromEnv.isBlank()) {
            return requireFile(Path.of(fromEnv.trim()), ENV_LIBRARY, maskedUri);
        }
        String fileName = System.mapLibraryName(LIBRARY_NAME);
        List<String> searched = new ArrayList<>();
        searched.add("library= option (not set)");
        searched.add(ENV_LIBRARY + " (not set)");
        if (javaLibraryPath != null) {
            for (String dir : javaLibraryPath.split(File.pathSeparator)) {
                if (dir.isBlank()) {
                    continue;
                }
                Path candidate = Path.of(dir).resolve(fileName);
                if (Files.isRegularFile(candidate)) {
                    return new MooncakeLibraryLocation(candidate, fileName, "java.library.path");
                }
                searched.add(candidate.toString());
            }
        }
        if (linkerFinds(fileName)) {
            return new MooncakeLibraryLocation(null, fileName, "system library path");
        }
        searched.add(fileName + " through the dynamic linker (LD_LIBRARY_PATH, ld.so.cache)");
        throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "libmooncake_store.so not found; searched: "
                        + String.join("; ", searched))
                .store(maskedUri).operation("open").hint(BUILD_HINT).build();
    }

    private static MooncakeLibraryLocation requireFile(Path p, String source, String maskedUri) {
        if (!Files.isRegularFile(p)) {
            throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "the Mooncake store library " + p
                            + " named by " + source + " does not exist or is not a file")
                    .store(maskedUri).operation("open")
                    .hint("fix the path in " + source + ". " + BUILD_HINT).build();
        }
        return new MooncakeLibraryLocation(p, p.getFileName().toString(), source);
    }

    @SuppressWarnings("restricted")
    private static boolean linkerFinds(String fileName) {
        try {
            // The global arena keeps a found library loaded; MooncakeStoreLibrary loads the same one again by name.
            SymbolLookup.libraryLookup(fileName, Arena.global());
            return true;
        } catch (IllegalArgumentException notFound) {
            return false;
        } catch (IllegalCallerException denied) {
            throw MooncakeStoreLibrary.nativeAccessDenied(denied);
        }
    }
}
