package dev.kvconnector.kvctl;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Writes a file whole or not at all: into a temporary file beside the target (same directory, so the same file
 * system), renamed over the target only when the writer succeeded. A writer that fails or declines leaves an
 * existing target untouched and no temporary file behind. The file gets mode 0600 (that of
 * {@link Files#createTempFile}).
 */
final class AtomicFile {
    /** Fills the temporary file. */
    @FunctionalInterface
    interface Writer {
        /** Writes {@code tmp}; returns whether to keep it (rename it over the target) or discard it. */
        boolean write(Path tmp) throws IOException;
    }

    private AtomicFile() {
    }

    /** The directory a target file goes into; the current directory for a bare name. */
    static Path directoryOf(Path target) {
        Path parent = target.toAbsolutePath().getParent();
        return parent == null ? Path.of(".").toAbsolutePath() : parent;
    }

    /**
     * Runs {@code writer} on a new temporary file beside {@code target} and renames it over {@code target} when the
     * writer returns true. Returns what the writer returned.
     */
    static boolean write(Path target, Writer writer) throws IOException {
        Path tmp = Files.createTempFile(directoryOf(target), "." + target.getFileName() + ".", ".kvctl-tmp");
        boolean moved = false;
        try {
            if (!writer.write(tmp)) {
                return false;
            }
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            moved = true;
            return true;
        } finally {
            if (!moved) {
                Files.deleteIfExists(tmp);
            }
        }
    }
}
