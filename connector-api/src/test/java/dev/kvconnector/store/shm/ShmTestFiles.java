package dev.kvconnector.store.shm;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/** A private directory per test, on tmpfs where the host has one, removed afterwards. */
final class ShmTestFiles {
    private ShmTestFiles() {
    }

    static Path newDir() throws IOException {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? Files.createTempDirectory(shm, "kvc-shm-test-")
                : Files.createTempDirectory("kvc-shm-test-");
    }

    static void delete(Path dir) throws IOException {
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * A private directory for one test class, made before its tests and removed after them:
     * {@code @RegisterExtension static final ShmTestFiles.ClassDir DIR = new ShmTestFiles.ClassDir();}.
     */
    static final class ClassDir implements BeforeAllCallback, AfterAllCallback {
        private Path dir;

        @Override
        public void beforeAll(ExtensionContext context) throws IOException {
            dir = newDir();
        }

        @Override
        public void afterAll(ExtensionContext context) throws IOException {
            delete(dir);
        }

        /** A store in a new file {@code name-<uuid>} of this directory, with the URI's other {@code options}. */
        KVStore openFresh(String name, String options) {
            return new ShmStoreProvider().open(StoreUri.parse("shm:/" + name + "-" + UUID.randomUUID() + "?" + options
                    + "&dir=" + dir));
        }
    }
}
