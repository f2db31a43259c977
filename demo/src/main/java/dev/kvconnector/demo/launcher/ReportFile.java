package dev.kvconnector.demo.launcher;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * Writes a report file whole or not at all: into a temporary file beside the target, flushed to disk, then renamed
 * over the target. A failure at any step removes the temporary file and leaves a report already there untouched.
 */
final class ReportFile {

    /** Writes the file's content to a stream (which it may close). */
    interface Body {
        void writeTo(OutputStream out) throws IOException;
    }

    private ReportFile() {
    }

    /**
     * Writes {@code target} from {@code body}.
     *
     * @throws IOException naming the target when writing or renaming failed; the target is then as it was
     */
    static void write(Path target, Body body) throws IOException {
        Path dir = target.toAbsolutePath().getParent();
        Path tmp = Files.createTempFile(dir, "." + target.getFileName() + ".", ".tmp");
        try {
            try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.WRITE)) {
                body.writeTo(out);
            }
            try (FileChannel c = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
                c.force(true);
            }
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw new IOException("cannot write " + target + " (left as it was): " + e, e);
        }
    }
}
