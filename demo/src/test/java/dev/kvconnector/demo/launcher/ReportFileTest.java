package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A report file is written whole or not at all. */
class ReportFileTest {

    private static List<String> names(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void aWriteReplacesTheOldReportAndLeavesNothingElse(@TempDir Path dir) throws Exception {
        Path target = dir.resolve("demo.json");
        Files.writeString(target, "old");

        ReportFile.write(target, out -> out.write("new".getBytes(StandardCharsets.UTF_8)));

        assertEquals("new", Files.readString(target));
        assertEquals(List.of("demo.json"), names(dir));
    }

    @Test
    void aWriteThatFailsHalfwayLeavesTheOldReportWholeAndNoTemporaryFile(@TempDir Path dir) throws Exception {
        Path target = dir.resolve("demo.html");
        Files.writeString(target, "the previous report");

        IOException e = assertThrows(IOException.class, () -> ReportFile.write(target, out -> {
            out.write("<html>half a page".getBytes(StandardCharsets.UTF_8));
            throw new IOException("No space left on device");
        }));

        assertEquals("the previous report", Files.readString(target));
        assertEquals(List.of("demo.html"), names(dir));
        assertTrue(e.getMessage().contains(target.toString()) && e.getMessage().contains("No space left"),
                e.getMessage());
    }

    @Test
    void aFailedRenameRemovesTheTemporaryFile(@TempDir Path dir) throws Exception {
        Path target = dir.resolve("demo.json");
        Files.createDirectories(target.resolve("in-the-way"));

        assertThrows(IOException.class, () -> ReportFile.write(target, out -> out.write('x')));

        assertEquals(List.of("demo.json"), names(dir));
        assertTrue(Files.isDirectory(target.resolve("in-the-way")));
    }
}
