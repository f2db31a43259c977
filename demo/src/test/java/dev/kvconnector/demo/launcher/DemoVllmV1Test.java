package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvctl demo --scheme vllm-v1} end to end with the tiny model: child engine JVMs storing vLLM V1's
 * MooncakeStoreConnector keys and headerless block values in a shared {@code shm:} store, the real proxy, both XpYd
 * runs (v1, then layer-wise in the concurrent flow).
 */
@ExtendWith(NoEngineLeftRunning.class)
class DemoVllmV1Test {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int REQUESTS = 6;


    @Test
    void vllmV1KeysAndValuesAreTokenExactAndEveryDecodeLoadsEveryFullBlock(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("results");
        String store = "shm:/kvc-demo-v1-" + UUID.randomUUID().toString().substring(0, 8) + "?capacity=64MiB&dir=" + dir;
        // Prompts of at least two 16-token blocks, so every request has full blocks to store and load.
        int exit = new CommandLine(new DemoCommand()).execute("--tiny", "--prefill", "1", "--decode", "1",
                "--requests", Integer.toString(REQUESTS), "--clients", "2", "--max-tokens", "4", "--min-prompt", "40",
                "--max-prompt", "120", "--store", store, "--scheme", "vllm-v1", "--out", out.toString());

        assertEquals(0, exit);
        JsonNode report = JSON.readTree(out.resolve("demo.json").toFile());
        assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
        assertEquals("vllm-v1", report.path("config").path("scheme").asText(), report.path("config").toString());
        assertEquals(3, report.path("runs").size(), "the reference and two XpYd runs");
        for (int i = 1; i < 3; i++) {
            JsonNode run = report.path("runs").get(i);
            assertEquals(REQUESTS, run.path("decode_requests").asLong(), run.toString());
            assertEquals(REQUESTS, run.path("loaded_prefills").asLong(),
                    "a decode did not load every full block of its prompt: " + run);
            assertTrue(run.path("bytes_inserted").asLong() > 0, run.toString());
            assertTrue(run.path("bytes_dropped").asLong() > 0, run.toString());
        }
        assertTrue(report.path("runs").get(2).path("layer_wise").asBoolean(), report.path("runs").get(2).toString());
    }
}
