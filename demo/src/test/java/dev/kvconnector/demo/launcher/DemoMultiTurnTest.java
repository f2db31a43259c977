package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvctl demo --workload multi-turn} end to end with the tiny model: real child engines (the decode engines
 * saving their decode KV), the real proxy under both policies (kv-aware sending a turn of which the store lacks a
 * short suffix to D alone), a shm: store, then a tiered: store over shm: and a real redis-server beside that redis
 * alone.
 */
class DemoMultiTurnTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Engine JVMs the demo started that are still alive (a redis-server the test started is not one). */
    private static List<ProcessHandle> engines() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(h -> h.info().commandLine().orElse("").contains("EngineCommand")).toList();
    }

    private static JsonNode run(JsonNode report, String name) {
        for (JsonNode r : report.path("runs")) {
            if (name.equals(r.path("name").asText())) {
                return r;
            }
        }
        throw new AssertionError("no run " + name + " in " + report.path("runs").findValuesAsText("name"));
    }

    private static JsonNode demo(Path out, String store, String... extra) throws Exception {
        List<String> args = new java.util.ArrayList<>(List.of("--workload", "multi-turn", "--tiny", "--prefill", "2",
                "--decode", "1", "--requests", "9", "--turns", "3", "--clients", "2", "--max-tokens", "4",
                "--store", store, "--out", out.toString()));
        args.addAll(List.of(extra));
        int exit = new CommandLine(new DemoCommand()).execute(args.toArray(String[]::new));
        assertEquals(0, exit);
        assertTrue(engines().isEmpty(), "engines left running: " + engines());
        return JSON.readTree(out.resolve("demo.json").toFile());
    }

    @Test
    void bothPoliciesAnswerTheSingleEnginesTokensAndTheReportComparesThem(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("results");
        String store = "shm:/kvc-mt-test-" + UUID.randomUUID().toString().substring(0, 8) + "?capacity=64MiB&dir=" + dir;
        JsonNode report = demo(out, store);

        assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
        assertEquals("multi-turn", report.at("/config/workload").asText());
        assertEquals(3, report.at("/config/conversations").asInt());
        assertEquals(3, report.path("runs").size(), "single, round-robin, kv-aware; no tier to compare");
        JsonNode rr = run(report, "round-robin");
        JsonNode kv = run(report, "kv-aware");
        assertEquals("round-robin", rr.path("policy").asText());
        assertEquals("kv-aware", kv.path("policy").asText());
        for (JsonNode r : List.of(rr, kv)) {
            assertEquals(9, r.path("per_request").size(), r.path("name").asText());
            assertTrue(r.path("prompt_tokens_recomputed").asLong() > 0, r.toString());
            assertEquals(9, r.path("decode_requests").asLong(), r.toString());
            assertTrue(r.path("ttft_ms").has("p50") && r.path("ttft_ms").has("p99"), r.toString());
            assertTrue(r.has("decode_only"), r.toString());
        }
        // The store holds a conversation's previous turn (P's insert of its prompt, D's save of its answer and of any
        // suffix D computed): a later turn adds at most 16 + 4 + 40 tokens to what the store holds, and goes to D alone,
        // which loads the rest, computes the suffix and saves its new full chunks.
        assertTrue(kv.path("decode_saved_chunks").asLong() > 0, kv.toString());
        assertTrue(kv.at("/kv_decisions/store_prefix").asLong() > 0, kv.path("kv_decisions").toString());
        assertEquals(kv.at("/kv_decisions/store_prefix").asLong(), kv.path("decode_only_suffix").asLong());
        assertTrue(kv.path("decode_only").asLong() >= kv.path("decode_only_suffix").asLong(), kv.toString());
        // The index's predictions held: every engine that reported found at least what it was promised, and the
        // store's prefix that D loaded was counted exact.
        assertTrue(kv.at("/kv_predictions/exact").asLong() > 0, kv.path("kv_predictions").toString());
        assertEquals(0, kv.at("/kv_predictions/over").asLong(), kv.path("kv_predictions").toString());
        // Later turns extend earlier ones, and the store holds the earlier ones: not every token is recomputed.
        assertTrue(kv.path("prompt_tokens").asLong() > kv.path("prompt_tokens_recomputed").asLong(), kv.toString());
        // Round robin never sends a request to D alone, and reads no index.
        assertTrue(rr.path("kv_decisions").isMissingNode(), "round-robin reads no index");
        assertEquals(0, rr.path("decode_only").asLong(), rr.toString());

        String text = Files.readString(out.resolve("demo.html"));
        assertTrue(text.contains("Policies and stores side by side") && text.contains("Prompt tokens recomputed"),
                "demo.html has no comparison");
        assertTrue(text.contains("kv-aware recomputed " + kv.path("prompt_tokens_recomputed").asLong()
                + " prompt tokens against " + rr.path("prompt_tokens_recomputed").asLong() + " under round-robin"),
                "no sentence comparing the policies");
    }

    @Test
    void aNegativeDecodeSuffixIsAUsageErrorThatStartsNothing(@TempDir Path dir) {
        String[] args = {"--workload", "multi-turn", "--tiny", "--kv-decode-max-suffix", "-16", "--out",
            dir.toString()};
        assertEquals(2, new CommandLine(new DemoCommand()).execute(args));
        DemoCommand demo = new DemoCommand();
        new CommandLine(demo).parseArgs(args);
        CommandLine.ParameterException e = assertThrows(CommandLine.ParameterException.class, demo::call);
        assertTrue(e.getMessage().contains("--kv-decode-max-suffix -16"), e.getMessage());
        assertTrue(engines().isEmpty(), "engines started: " + engines());
    }

    @Test
    void aTieredStoreRunsBesideItsRemoteTierAloneAndCountsTheBytesReadOverTheNetwork(@TempDir Path dir)
            throws Exception {
        try (RedisServerProcess redis = RedisServerProcess.start()) {
            Path out = dir.resolve("results");
            String shm = "shm:/kvc-mt-tier-" + UUID.randomUUID().toString().substring(0, 8) + "?capacity=64MiB&dir="
                    + dir;
            String remote = "valkey://" + redis.hostPort();
            JsonNode report = demo(out, "tiered:[" + shm + "][" + remote + "]");

            assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
            JsonNode tiered = run(report, "kv-aware");
            JsonNode alone = run(report, "kv-aware, last tier alone");
            assertEquals("tiered:[" + remote + "]", alone.path("store").asText());
            assertEquals(2, tiered.path("store_tiers").size(), tiered.toString());
            assertEquals(1, alone.path("store_tiers").size(), alone.toString());
            // Written through to both tiers, and every engine shares this host's shm: tier, so D reads it there.
            assertEquals(0, tiered.path("network_bytes_read").asLong(), tiered.path("store_tiers").toString());
            assertTrue(tiered.at("/store_tiers/0/hits").asLong() > 0, tiered.path("store_tiers").toString());
            assertTrue(tiered.path("network_bytes_written").asLong() > 0, tiered.path("store_tiers").toString());
            assertTrue(alone.path("network_bytes_read").asLong() > 0, alone.path("store_tiers").toString());
            assertTrue(tiered.path("bytes_dropped").asLong() > 0 && alone.path("bytes_dropped").asLong() > 0,
                    "D loaded its KV from the store in both");
            assertTrue(Files.readString(out.resolve("demo.html")).contains("Bytes read over the network"));
        }
    }
}
