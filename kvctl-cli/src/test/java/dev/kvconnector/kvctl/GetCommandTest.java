package dev.kvconnector.kvctl;

import static dev.kvconnector.kvctl.FakeRespServer.bulk;
import static dev.kvconnector.kvctl.FakeRespServer.error;
import static dev.kvconnector.kvctl.FakeRespServer.integer;
import static dev.kvconnector.kvctl.FakeRespServer.partialBulk;
import static dev.kvconnector.kvctl.KvctlTest.kvctl;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.kvctl.FakeRespServer.Reply;
import dev.kvconnector.kvctl.KvctlTest.Run;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvctl get} against a fake RESP server that lies about sizes, stalls or hangs up halfway: each failure exits
 * 1 with one message, leaves the existing output file as it was and no temporary file behind.
 */
class GetCommandTest {
    private static final byte[] OLD = "the file that was there before".getBytes(StandardCharsets.UTF_8);

    /** A server that answers CONFIG GET with an error (the store then uses defaults), and the rest by {@code get}. */
    private static Function<List<String>, Reply> script(long strlen, Reply get) {
        return cmd -> switch (cmd.getFirst().toUpperCase(Locale.ROOT)) {
            case "CONFIG" -> Reply.of(error("ERR unknown command 'CONFIG'"));
            case "STRLEN" -> Reply.of(integer(strlen));
            case "EXISTS" -> Reply.of(integer(1));
            case "GET" -> {
                if (get == null) {
                    throw new AssertionError("GET must not be sent");
                }
                yield get;
            }
            default -> Reply.of(error("ERR unknown command '" + cmd.getFirst() + "'"));
        };
    }

    private static Path existingOutput(Path dir) throws IOException {
        Path out = dir.resolve("out.bin");
        Files.write(out, OLD);
        return out;
    }

    private static void assertUntouched(Path dir, Path out) throws IOException {
        assertArrayEquals(OLD, Files.readAllBytes(out), "the existing file was changed");
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(List.of(out), files.toList(), "a temporary file was left behind");
        }
    }

    @Test
    void aSizeOverMaxBytesIsRefusedBeforeAnyFileIsCreated(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        try (FakeRespServer server = new FakeRespServer(script(999_999_999_999L, null))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString());
            assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
            assertTrue(r.err().contains("999999999999 bytes") && r.err().contains("--max-bytes 4294967296"), r.err());
            assertEquals(1, r.err().strip().lines().count(), r.err());
            assertUntouched(dir, out);
        }
    }

    @Test
    void aSizeOverTheFreeDiskSpaceIsRefusedBeforeAnyFileIsCreated(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        long petabyte = 1L << 50;
        try (FakeRespServer server = new FakeRespServer(script(petabyte, null))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString(), "--max-bytes",
                    "2048TiB");
            assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
            assertTrue(r.err().contains(petabyte + " bytes but " + dir) && r.err().contains("bytes free"), r.err());
            assertUntouched(dir, out);
        }
    }

    @Test
    void aGetThatStallsTimesOutAndLeavesTheOldFile(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        Reply halfThenStall = Reply.thenStall(partialBulk(100_000, new byte[50_000]));
        for (Reply stall : List.of(Reply.thenStall(new byte[0]), halfThenStall)) {
            try (FakeRespServer server = new FakeRespServer(script(100_000, stall))) {
                Run r = kvctl("get", "--store", server.uri("timeout=300ms"), "--key", "k", "--out", out.toString());
                assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
                assertTrue(r.err().contains("TIMEOUT"), r.err());
                assertUntouched(dir, out);
            }
        }
    }

    @Test
    void aServerThatHangsUpHalfwayLeavesTheOldFile(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        try (FakeRespServer server = new FakeRespServer(script(100_000,
                Reply.thenHangUp(partialBulk(100_000, new byte[30_000]))))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString());
            assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
            assertUntouched(dir, out);
        }
    }

    @Test
    void aValueLargerThanAnnouncedIsRetriedThenRefused(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        try (FakeRespServer server = new FakeRespServer(script(10, Reply.of(bulk(new byte[20]))))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString());
            assertEquals(Kvctl.EXIT_FAILURE, r.code(), r.out() + r.err());
            assertTrue(r.err().contains("changed size"), r.err());
            assertUntouched(dir, out);
        }
    }

    @Test
    void aCompleteGetReplacesTheFileWhole(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        byte[] value = "new bytes".getBytes(StandardCharsets.UTF_8);
        try (FakeRespServer server = new FakeRespServer(script(value.length, Reply.of(bulk(value))))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString());
            assertEquals(0, r.code(), r.out() + r.err());
            assertArrayEquals(value, Files.readAllBytes(out));
            try (Stream<Path> files = Files.list(dir)) {
                assertEquals(1, files.count());
            }
        }
    }

    @Test
    void anEmptyValueMakesAnEmptyFile(@TempDir Path dir) throws IOException {
        Path out = existingOutput(dir);
        try (FakeRespServer server = new FakeRespServer(script(0, Reply.of(bulk(new byte[0]))))) {
            Run r = kvctl("get", "--store", server.uri(""), "--key", "k", "--out", out.toString());
            assertEquals(0, r.code(), r.out() + r.err());
            assertEquals(0, Files.size(out));
        }
    }

    @Test
    void anOutputInAMissingDirectoryIsRefusedBeforeTheStoreIsAsked(@TempDir Path dir) {
        Path out = dir.resolve("no/such/dir/out.bin");
        Run r = kvctl("get", "--store", "valkey://127.0.0.1:1", "--key", "k", "--out", out.toString());
        assertEquals(Kvctl.EXIT_FAILURE, r.code());
        assertTrue(r.err().contains("the directory " + out.getParent() + " of --out " + out + " does not exist"),
                r.err());
    }

    @Test
    void aBadMaxBytesIsAUsageError(@TempDir Path dir) {
        Run r = kvctl("get", "--store", "memory:", "--key", "k", "--out", dir.resolve("o").toString(), "--max-bytes",
                "lots");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("'lots' is not a size"), r.err());
    }
}
