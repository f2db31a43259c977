package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.File;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Discovery order: library=, MOONCAKE_STORE_LIB, java.library.path, the dynamic linker; and the messages. */
class MooncakeLibraryLocatorTest {
    private static final String URI = "mooncake://127.0.0.1:50051";

    @TempDir
    Path dir;

    private Path file(String sub) throws IOException {
        Path d = Files.createDirectories(dir.resolve(sub));
        return Files.writeString(d.resolve("libmooncake_store.so"), "not really a library");
    }

    @Test
    void theLibraryOptionComesFirst() throws IOException {
        Path fromUri = file("uri");
        Path fromEnv = file("env");
        Path inPath = file("jlp");
        MooncakeLibraryLocation l = MooncakeLibraryLocator.locate(fromUri.toString(),
                Map.of(MooncakeLibraryLocator.ENV_LIBRARY, fromEnv.toString()), inPath.getParent().toString(), URI);
        assertEquals(fromUri, l.path());
        assertEquals("library= option", l.source());
    }

    @Test
    void theEnvironmentComesBeforeJavaLibraryPath() throws IOException {
        Path fromEnv = file("env");
        Path inPath = file("jlp");
        MooncakeLibraryLocation l = MooncakeLibraryLocator.locate(null,
                Map.of(MooncakeLibraryLocator.ENV_LIBRARY, fromEnv.toString()), inPath.getParent().toString(), URI);
        assertEquals(fromEnv, l.path());
        assertEquals(MooncakeLibraryLocator.ENV_LIBRARY, l.source());
    }

    @Test
    void javaLibraryPathIsSearchedDirectoryByDirectory() throws IOException {
        Path empty = Files.createDirectories(dir.resolve("empty"));
        Path inPath = file("jlp");
        String jlp = empty + File.pathSeparator + inPath.getParent();
        MooncakeLibraryLocation l = MooncakeLibraryLocator.locate(null, Map.of(), jlp, URI);
        assertEquals(inPath, l.path());
        assertEquals("java.library.path", l.source());
    }

    @Test
    void aNamedFileThatDoesNotExistIsAnErrorNotAFallThrough() throws IOException {
        Path inPath = file("jlp");
        KVException e = assertThrows(KVException.class, () -> MooncakeLibraryLocator.locate(null,
                Map.of(MooncakeLibraryLocator.ENV_LIBRARY, "/nowhere/libmooncake_store.so"),
                inPath.getParent().toString(), URI));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains("/nowhere/libmooncake_store.so")
                && e.getMessage().contains("MOONCAKE_STORE_LIB"), e.getMessage());
        KVException fromUri = assertThrows(KVException.class,
                () -> MooncakeLibraryLocator.locate("/nowhere/lib.so", Map.of(), null, URI));
        assertTrue(fromUri.getMessage().contains("library= option"), fromUri.getMessage());
    }

    @Test
    @SuppressWarnings("restricted")
    void aMissingLibraryListsWhatWasSearchedAndHowToBuildIt() throws IOException {
        boolean systemHasOne;
        try {
            SymbolLookup.libraryLookup(System.mapLibraryName("mooncake_store"), Arena.global());
            systemHasOne = true;
        } catch (IllegalArgumentException e) {
            systemHasOne = false;
        }
        assumeTrue(!systemHasOne, "this machine has a libmooncake_store.so on the linker's path");
        Path empty = Files.createDirectories(dir.resolve("empty"));
        KVException e = assertThrows(KVException.class,
                () -> MooncakeLibraryLocator.locate(null, Map.of(), empty.toString(), URI));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertEquals(URI, e.storeUri());
        assertTrue(e.getMessage().contains("library= option (not set)"), e.getMessage());
        assertTrue(e.getMessage().contains("MOONCAKE_STORE_LIB (not set)"), e.getMessage());
        assertTrue(e.getMessage().contains(empty.resolve("libmooncake_store.so").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("dynamic linker"), e.getMessage());
        assertTrue(e.hint().contains("-DWITH_STORE_C_SHARED=ON -DBUILD_SHARED_LIBS=OFF"), e.hint());
        assertTrue(e.hint().contains("pip wheel"), e.hint());
    }

    @Test
    void aFileThatIsNotALibraryFailsToLoadWithTheDependencyHint() throws IOException {
        Path fake = file("fake");
        KVException e = assertThrows(KVException.class,
                () -> MooncakeStoreLibrary.load(new MooncakeLibraryLocation(fake, "x", "test")));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains(fake.toString()), e.getMessage());
        assertTrue(e.hint().contains("ldd"), e.hint());
    }

    @Test
    void aLibraryWithoutTheStoreSymbolsNamesTheMissingSymbol() {
        Path libc = Path.of("/lib/x86_64-linux-gnu/libc.so.6");
        if (!Files.isRegularFile(libc)) {
            libc = Path.of("/usr/lib64/libc.so.6");
        }
        assumeTrue(Files.isRegularFile(libc), "no libc.so.6 at a known path");
        Path l = libc;
        KVException e = assertThrows(KVException.class,
                () -> MooncakeStoreLibrary.load(new MooncakeLibraryLocation(l, "libc", "test")));
        assertEquals(ErrorCode.NATIVE_LIBRARY_MISSING, e.code());
        assertTrue(e.getMessage().contains("does not export mooncake_store_create"), e.getMessage());
        assertTrue(e.hint().contains("WITH_STORE_C_SHARED"), e.hint());
    }

    @Test
    void theCacheKeyNormalisesPaths() {
        MooncakeLibraryLocation a = new MooncakeLibraryLocation(Path.of("/a/b/../c/lib.so"), "lib.so", "x");
        MooncakeLibraryLocation b = new MooncakeLibraryLocation(Path.of("/a/c/lib.so"), "lib.so", "y");
        assertEquals(a.cacheKey(), b.cacheKey());
        assertEquals("dlopen:libmooncake_store.so",
                new MooncakeLibraryLocation(null, "libmooncake_store.so", "system").cacheKey());
        assertNull(new MooncakeLibraryLocation(null, "n", "s").path());
    }
}
