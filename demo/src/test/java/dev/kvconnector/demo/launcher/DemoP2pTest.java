package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvctl demo --transport p2p} end to end with the tiny model: child engine JVMs whose KV moves from P's cache
 * into D's through the transfer engine's test double (loopback TCP), no store, the real proxy in its v1 flow.
 */
class DemoP2pTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int REQUESTS = 4;

    @AfterEach
    void noChildProcessRemains() {
        List<ProcessHandle> alive = ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).toList();
        assertTrue(alive.isEmpty(), "child processes left running: " + alive.stream()
                .map(h -> h.pid() + " " + h.info().commandLine().orElse("?")).toList());
    }

    @Test
    void peerToPeerRunIsTokenExactAndEveryDecodeLoadsItsPrefillFromP(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("results");
        int exit = new CommandLine(new DemoCommand()).execute("--tiny", "--prefill", "1", "--decode", "1",
                "--requests", Integer.toString(REQUESTS), "--clients", "2", "--max-tokens", "4", "--max-prompt", "120",
                "--transport", "p2p", "--out", out.toString());

        assertEquals(0, exit);
        JsonNode report = JSON.readTree(out.resolve("demo.json").toFile());
        assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
        assertEquals("p2p", report.path("config").path("transport").asText(), report.path("config").toString());
        assertEquals(2, report.path("runs").size(), "the reference and one peer-to-peer run");
        JsonNode run = report.path("runs").get(1);
        assertEquals("xpyd-p2p", run.path("name").asText());
        assertEquals("v1", run.path("flow").asText(), run.toString());
        assertEquals(REQUESTS, run.path("decode_requests").asLong(), run.toString());
        assertEquals(REQUESTS, run.path("loaded_prefills").asLong(), "a decode recomputed its prefill: " + run);
        assertTrue(run.path("bytes_dropped").asLong() > 0, run.toString());
        assertEquals(run.path("bytes_inserted").asLong(), run.path("bytes_dropped").asLong(),
                "P wrote other bytes than D accepted: " + run);
        assertTrue(run.path("insert_layer_us").path("count").asLong() > 0, run.toString());
        assertTrue(run.path("drop_layer_us").path("count").asLong() > 0, run.toString());
        String text = Files.readString(out.resolve("demo.html"));
        assertTrue(text.contains("xpyd-p2p"), "demo.html does not name the peer-to-peer run");
    }
}
