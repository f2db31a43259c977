package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code kvctl demo} end to end with the tiny model: real child engine JVMs, the real proxy, a shm: store. */
@ExtendWith(NoEngineLeftRunning.class)
class DemoCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();


    @Test
    void onePrefillOneDecodeOverShmMatchesTheSingleInstanceAndWritesTheReport(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("results");
        String store = "shm:/kvc-demo-test-" + UUID.randomUUID().toString().substring(0, 8) + "?capacity=64MiB&dir=" + dir;
        int exit = new CommandLine(new DemoCommand()).execute("--tiny", "--prefill", "1", "--decode", "1",
                "--requests", "6", "--clients", "2", "--max-tokens", "4", "--max-prompt", "120", "--store", store,
                "--out", out.toString());

        assertEquals(0, exit);
        JsonNode report = JSON.readTree(out.resolve("demo.json").toFile());
        assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
        assertEquals(3, report.path("runs").size());
        for (JsonNode run : report.path("runs")) {
            assertEquals(6, run.path("per_request").size(), run.path("name").asText());
            assertTrue(run.path("ttft_ms").path("p50").asDouble() > 0, run.toString());
            assertTrue(run.path("ttft_ms").has("p99"));
        }
        for (int i = 1; i < 3; i++) {
            JsonNode run = report.path("runs").get(i);
            assertEquals(6, run.path("decode_requests").asLong(), run.toString());
            assertTrue(run.path("loaded_prefills").asLong() > 0, "no decode request loaded its prefill: " + run);
            assertTrue(run.path("bytes_inserted").asLong() > 0, run.toString());
            assertTrue(run.path("bytes_dropped").asLong() > 0, run.toString());
            assertTrue(run.path("insert_layer_us").path("count").asLong() > 0, run.toString());
            assertTrue(run.path("drop_layer_us").has("p99"), run.toString());
            assertTrue(run.has("hit_rate") && run.has("misses"), run.toString());
        }
        assertTrue(report.path("runs").get(2).path("layer_wise").asBoolean());
        assertTrue(report.path("runs").get(2).path("drop_wait_us").path("count").asLong() > 0,
                "the layer-wise run counted no wait for P: " + report.path("runs").get(2));
        assertTrue(report.path("machine").path("load_average_1m_start").isNumber(), report.path("machine").toString());
        assertTrue(report.path("machine").path("cpus").asInt() > 0);
        try (var files = Files.list(out)) {
            assertEquals(List.of("demo.html", "demo.json", "logs"),
                    files.map(f -> f.getFileName().toString()).sorted().toList(), "a temporary file was left behind");
        }
        String html = Files.readString(out.resolve("demo.html"));
        assertTrue(html.contains("<svg"), "demo.html has no chart");
        assertTrue(html.contains("Time to first token"));
    }

    @Test
    void anEngineThatCannotStartFailsTheDemoAndLeavesNoProcess(@TempDir Path dir) {
        int exit = new CommandLine(new DemoCommand()).execute("--tiny", "--prefill", "1", "--decode", "1",
                "--requests", "2", "--store", "nosuchstore://x", "--out", dir.toString(), "--start-timeout-s", "60");

        assertNotEquals(0, exit);
        assertTrue(Files.exists(dir.resolve("logs").resolve("prefill-0.log")), "the failed engine's log is kept");
    }
}
