package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * BouncyCastle is an optional dependency of connector-api, used only for vllm-v0 keys: without it, planning such keys
 * fails with an error that names the artifact to add, and nothing else needs it.
 */
class VllmV0WithoutBouncyCastleTest {

    @Test
    void theMessageNamesTheMissingClassAndTheArtifactToAdd() {
        KVException e = VllmV0KeyScheme.blake2bMissing(VllmV0KeyScheme.BLAKE2B_CLASS);
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("org.bouncycastle.crypto.digests.Blake2bDigest is not on the class path")
                && e.getMessage().contains("org.bouncycastle:bcprov-jdk18on"), e.getMessage());
        KVException absent = assertThrows(KVException.class, () -> VllmV0KeyScheme.requireClass("no.such.Blake2b"));
        assertTrue(absent.getMessage().contains("no.such.Blake2b is not on the class path"), absent.getMessage());
    }

    /** The class path of this test without BouncyCastle's jar, in a loader that does not delegate to this one. */
    private static URLClassLoader withoutBouncyCastle() throws MalformedURLException {
        List<URL> urls = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!entry.contains("bcprov")) {
                urls.add(Path.of(entry).toUri().toURL());
            }
        }
        return new URLClassLoader(urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
    }

    @Test
    void planningVllmV0KeysWithoutBouncyCastleFailsWithThatMessageAndOtherSchemesWork() throws Exception {
        try (URLClassLoader loader = withoutBouncyCastle()) {
            assertThrows(ClassNotFoundException.class, () -> loader.loadClass(VllmV0KeyScheme.BLAKE2B_CLASS));
            Class<?> schemes = loader.loadClass(KeySchemes.class.getName());
            Class<?> context = loader.loadClass(KeyContext.class.getName());
            Class<?> layout = loader.loadClass("dev.kvconnector.layout.KVLayout");
            Class<?> tokens = loader.loadClass(RequestTokens.class.getName());
            Object ctx = context.getMethod("of", String.class, layout)
                    .invoke(null, "m", layout.getMethod("preset", String.class).invoke(null, "llama3-8b"));
            Object request = tokens.getMethod("of", int[].class).invoke(null, (Object) new int[] {1, 2, 3});
            Object kvc = schemes.getMethod("byName", String.class).invoke(null, "kvc-v1");
            kvc.getClass().getMethod("plan", context, tokens).invoke(kvc, ctx, request);
            Object v0 = schemes.getMethod("byName", String.class).invoke(null, VllmV0KeyScheme.NAME);
            InvocationTargetException e = assertThrows(InvocationTargetException.class,
                    () -> v0.getClass().getMethod("plan", context, tokens).invoke(v0, ctx, request));
            Throwable cause = e.getCause();
            assertEquals(KVException.class.getName(), cause.getClass().getName(), String.valueOf(cause));
            assertTrue(cause.getMessage().contains("org.bouncycastle:bcprov-jdk18on"), cause.getMessage());
        }
    }
}
