package dev.kvconnector.kvctl;

import static dev.kvconnector.kvctl.KvctlTest.kvctl;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.kvctl.KvctlTest.Run;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AtomicFileTest {
    private static List<Path> files(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.toList();
        }
    }

    @Test
    void aWriterThatFailsLeavesTheTargetAndNoTemporaryFile(@TempDir Path dir) throws IOException {
        Path target = dir.resolve("report.json");
        Files.writeString(target, "old");
        assertThrows(IOException.class, () -> AtomicFile.write(target, tmp -> {
            Files.writeString(tmp, "half");
            throw new IOException("disk full");
        }));
        assertEquals("old", Files.readString(target));
        assertEquals(List.of(target), files(dir));
    }

    @Test
    void aWriterThatDeclinesLeavesTheTargetAndNoTemporaryFile(@TempDir Path dir) throws IOException {
        Path target = dir.resolve("report.json");
        assertFalse(AtomicFile.write(target, tmp -> {
            Files.writeString(tmp, "half");
            return false;
        }));
        assertEquals(List.of(), files(dir));
    }

    @Test
    void aWriterThatSucceedsReplacesTheTarget(@TempDir Path dir) throws IOException {
        Path target = dir.resolve("report.json");
        Files.writeString(target, "old");
        assertTrue(AtomicFile.write(target, tmp -> {
            Files.writeString(tmp, "new");
            return true;
        }));
        assertEquals("new", Files.readString(target));
        assertEquals(List.of(target), files(dir));
    }

    @Test
    void benchJsonIntoAMissingDirectoryFailsWithItsNameAndWritesNothing(@TempDir Path dir) throws IOException {
        Path json = dir.resolve("no/such/dir/bench.json");
        Run r = kvctl("bench", "--store", "memory:", "--model", "qwen2.5-0.5b", "--tokens", "64", "--iterations", "1",
                "--warmup", "0", "--json", json.toString());
        assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("cannot write --json " + json + ": no such file or directory"), r.err());
        assertEquals(List.of(), files(dir));
    }
}
