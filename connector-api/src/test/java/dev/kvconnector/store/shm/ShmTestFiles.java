package dev.kvconnector.store.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

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
}
