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
 * How one of Mooncake's native libraries is found, in this order: the URI's {@code library=} option; an environment
 * variable; each directory of {@code java.library.path}; the dynamic linker's own search ({@code LD_LIBRARY_PATH},
 * {@code ld.so.cache}). The first two name a file that must exist: a wrong path is an error, never a silent
 * fall-through to another library.
 *
 * @param envVariable the environment variable that names the library file
 * @param libraryName the library's base name, as {@code System.loadLibrary} takes it
 * @param description what the library is, for messages (for example "the Mooncake store library")
 * @param buildHint how to build or get the library, appended to every error's hint
 */
public record NativeLibrarySearch(String envVariable, String libraryName, String description, String buildHint) {

    /**
     * Locates the library.
     *
     * @param uriLibrary the {@code library=} option, or null
     * @param env the environment (normally {@code System.getenv()})
     * @param javaLibraryPath the value of {@code java.library.path}, or null
     * @param maskedUri the URI for error messages, secrets masked
     * @throws KVException {@code NATIVE_LIBRARY_MISSING} naming every place searched
     */
    public MooncakeLibraryLocation locate(String uriLibrary, Map<String, String> env, String javaLibraryPath,
                                          String maskedUri) {
        if (uriLibrary != null && !uriLibrary.isBlank()) {
            return requireFile(Path.of(uriLibrary.trim()), "library= option", maskedUri);
        }
        String fromEnv = env.get(envVariable);
        if (fromEnv != null && !fromEnv.isBlank()) {
            return requireFile(Path.of(fromEnv.trim()), envVariable, maskedUri);
        }
        String fileName = System.mapLibraryName(libraryName);
        List<String> searched = new ArrayList<>();
        searched.add("library= option (not set)");
        searched.add(envVariable + " (not set)");
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
        throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, description + " " + fileName + " was not found; "
                        + "searched: " + String.join("; ", searched))
                .store(maskedUri).operation("open").hint(buildHint).build();
    }

    /** The error for a JVM that denies native access, naming both forms of the flag. */
    public static KVException nativeAccessDenied(IllegalCallerException denied) {
        return KVException.of(ErrorCode.INVALID_CONFIG, "the JVM denies native access, which the Mooncake bindings "
                        + "need: " + denied.getMessage())
                .operation("open").cause(denied)
                .hint("start java with --enable-native-access=ALL-UNNAMED (class path), or "
                        + "--enable-native-access=dev.kvconnector.mooncake (module path)")
                .build();
    }

    private MooncakeLibraryLocation requireFile(Path p, String source, String maskedUri) {
        if (!Files.isRegularFile(p)) {
            throw KVException.of(ErrorCode.NATIVE_LIBRARY_MISSING, description + " " + p + " named by " + source
                            + " does not exist or is not a file")
                    .store(maskedUri).operation("open")
                    .hint("fix the path in " + source + ". " + buildHint).build();
        }
        return new MooncakeLibraryLocation(p, p.getFileName().toString(), source);
    }

    @SuppressWarnings("restricted")
    private static boolean linkerFinds(String fileName) {
        try {
            // The global arena keeps a found library loaded; the binding loads the same one again by name.
            SymbolLookup.libraryLookup(fileName, Arena.global());
            return true;
        } catch (IllegalArgumentException notFound) {
            return false;
        } catch (IllegalCallerException denied) {
            throw nativeAccessDenied(denied);
        }
    }
}
