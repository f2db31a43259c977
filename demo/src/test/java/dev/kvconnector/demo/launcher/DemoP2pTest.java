package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.demo.ModelConfig;
import dev.kvconnector.layout.KVLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvctl demo --transport p2p} and {@code p2p+store} end to end with the tiny model: child engine JVMs whose KV
 * moves from P's cache into D's through the transfer engine's test double (loopback TCP), the real proxy in its v1
 * and concurrent flows; with {@code p2p+store} a shared {@code shm:} store beside it.
 */
@ExtendWith(NoEngineLeftRunning.class)
class DemoP2pTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int REQUESTS = 4;


    private static JsonNode demo(Path out, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--tiny", "--prefill", "1", "--decode", "1", "--requests",
                Integer.toString(REQUESTS), "--clients", "2", "--max-tokens", "4", "--max-prompt", "120", "--out",
                out.toString()));
        all.addAll(List.of(args));
        assertEquals(0, new CommandLine(new DemoCommand()).execute(all.toArray(String[]::new)));
        JsonNode report = JSON.readTree(out.resolve("demo.json").toFile());
        assertTrue(report.path("tokens_equal").asBoolean(), report.path("mismatches").toString());
        return report;
    }

    /** Bytes of KV in {@code tokens} tokens of every layer of the tiny model. */
    private static long kvBytes(int tokens) {
        KVLayout layout = ModelConfig.tiny(0).kvLayout();
        return layout.layerBytes(tokens) * layout.numLayers();
    }

    /** The run's KV bytes of every prompt whole (P2P) or of its full blocks alone (a vllm-v1 store). */
    private static long expectedBytes(JsonNode run, boolean fullBlocksOnly) {
        long sum = 0;
        for (JsonNode r : run.path("per_request")) {
            int t = r.path("prompt_tokens").asInt();
            sum += kvBytes(fullBlocksOnly ? t - t % ModelConfig.BLOCK_SIZE : t);
        }
        return sum;
    }

    private static void everyDecodeLoadedItsPrefill(JsonNode run) {
        assertEquals(REQUESTS, run.path("decode_requests").asLong(), run.toString());
        assertEquals(REQUESTS, run.path("loaded_prefills").asLong(), "a decode recomputed its prefill: " + run);
    }

    @Test
    void peerToPeerRunsInTheV1AndConcurrentFlowsAreTokenExactAndEveryDecodeLoadsItsPrefillFromP(@TempDir Path dir)
            throws Exception {
        Path out = dir.resolve("results");
        JsonNode report = demo(out, "--transport", "p2p");

        assertEquals("p2p", report.path("config").path("transport").asText(), report.path("config").toString());
        assertEquals(3, report.path("runs").size(), "the reference, a v1 and a concurrent peer-to-peer run");
        for (int i = 1; i <= 2; i++) {
            JsonNode run = report.path("runs").get(i);
            assertEquals(i == 1 ? "xpyd-p2p" : "xpyd-p2p-concurrent", run.path("name").asText());
            assertEquals(i == 1 ? "v1" : "concurrent", run.path("flow").asText(), run.toString());
            everyDecodeLoadedItsPrefill(run);
            assertEquals(expectedBytes(run, false), run.path("bytes_dropped").asLong(), run.toString());
            assertEquals(run.path("bytes_inserted").asLong(), run.path("bytes_dropped").asLong(),
                    "P wrote other bytes than D accepted: " + run);
            assertTrue(run.path("insert_layer_us").path("count").asLong() > 0, run.toString());
            assertTrue(run.path("drop_layer_us").path("count").asLong() > 0, run.toString());
        }
        String html = Files.readString(out.resolve("demo.html"));
        assertTrue(html.contains("xpyd-p2p-concurrent"), "demo.html does not name the concurrent peer-to-peer run");
    }

    @Test
    void peerToPeerBesideAStoreIsTokenExactAndReportsTheBytesOfEachTransport(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("results");
        JsonNode report = demo(out, "--transport", "p2p+store");

        assertEquals("vllm-v1", report.path("config").path("scheme").asText(), "p2p+store's default scheme");
        assertEquals(3, report.path("runs").size(), "the reference, the proxied run and the store-reuse run");
        JsonNode both = report.path("runs").get(1);
        assertEquals("xpyd-p2p+store-concurrent", both.path("name").asText());
        everyDecodeLoadedItsPrefill(both);
        JsonNode p2p = both.path("transports").path("p2p");
        JsonNode store = both.path("transports").path("store");
        assertEquals(expectedBytes(both, false), p2p.path("bytes_dropped").asLong(), both.toString());
        assertEquals(p2p.path("bytes_inserted").asLong(), p2p.path("bytes_dropped").asLong(), "P2P: " + both);
        assertEquals(expectedBytes(both, true), store.path("bytes_inserted").asLong(), "P stored the full blocks");
        assertEquals(0, store.path("bytes_dropped").asLong(), "D read the store for a request P sent: " + both);
        assertTrue(p2p.path("insert_layer_us").path("count").asLong() > 0, both.toString());
        assertTrue(store.path("insert_layer_us").path("count").asLong() > 0, both.toString());

        JsonNode reuse = report.path("runs").get(2);
        assertEquals("store-reuse", reuse.path("name").asText());
        everyDecodeLoadedItsPrefill(reuse);
        assertEquals(store.path("bytes_inserted").asLong(),
                reuse.path("transports").path("store").path("bytes_dropped").asLong(),
                "store: D alone read other bytes than P stored: " + reuse);
        assertEquals(0, reuse.path("transports").path("p2p").path("bytes_dropped").asLong(), reuse.toString());
        assertTrue(reuse.path("transports").path("store").path("drop_layer_us").path("count").asLong() > 0,
                reuse.toString());
        String text = Files.readString(out.resolve("demo.html"));
        assertTrue(text.contains("xpyd-p2p+store-concurrent p2p: insert (P)")
                && text.contains("store-reuse store: copy (D)"), "demo.html has no per-transport layer bars");
    }
}
