package dev.kvconnector.mooncake.te;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.MooncakeLibraryLocation;
import java.io.File;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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

    private TransferEngineLocator() {
    }

    /**
     * Locates the library.
     *
     * @param uriLibrary the {@code library=} option, or null
     * @param env the environment (normally {@code System.getenv()})
     * @param javaLibraryPath the value of {@code java.library.path}, or null
     * @param uri the engine URI for error messages
     * @throws KVException {@code NATIVE_LIBRARY_MISSING} naming every place searched
     */
    public static MooncakeLibraryLocation locate(String uriLibrary, Map<String, String> env, String javaLibraryPath,
                                                 String uri) {
        if (uriLibrary != null && !uriLibrary.isBlank()) {
            return requireFile(Path.of(uriLibrary.trim()), "library= option", uri);
        }
        String fromEnv = env.get(ENV_LIBRARY);
        if (fromEnv != null && !fromEnv.isBlank()) {
            return requireFile(Path.of(fromEnv.trim()), ENV_LIBRARY, uri);
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
        throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "the Mooncake transfer engine library was not found; "
                        + "searched: " + String.join("; ", searched))
                .store(uri).operation("open").hint(BUILD_HINT).build();
    }

    private static MooncakeLibraryLocation requireFile(Path p, String source, String uri) {
        if (!Files.isRegularFile(p)) {
            throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, "the transfer engine library " + p
                            + " named by " + source + " does not exist or is not a file")
                    .store(uri).operation("open")
                    .hint("fix the path in " + source + ". " + BUILD_HINT).build();
        }
        return new MooncakeLibraryLocation(p, p.getFileName().toString(), source);
    }

    @SuppressWarnings("restricted")
    private static boolean linkerFinds(String fileName) {
        try {
            // The global arena keeps a found library loaded; TransferEngineLibrary loads the same one again by name.
            SymbolLookup.libraryLookup(fileName, Arena.global());
            return true;
        } catch (IllegalArgumentException notFound) {
            return false;
        } catch (IllegalCallerException denied) {
            throw TransferEngineLibrary.nativeAccessDenied(denied);
        }
    }
}
