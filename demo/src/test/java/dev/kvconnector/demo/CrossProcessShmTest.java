package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** 1P1D across two processes: P is a real {@link EngineCommand} JVM, D runs here; they share only a shm: store. */
class CrossProcessShmTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long SEED = 11;

    @Test
    void decodeHereLoadsWhatAProducerProcessComputed(@TempDir Path dir) throws Exception {
        String uri = "shm:/kvc-demo-" + UUID.randomUUID().toString().substring(0, 8) + "?capacity=32MiB&dir=" + dir;
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(List.of(java.toString(), "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                "-cp", System.getProperty("java.class.path"), EngineCommand.class.getName(), "--port", "0", "--tiny",
                "--seed", Long.toString(SEED), "--role", "kv_producer", "--store", uri))
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        ModelWeights weights = ModelWeights.random(ModelConfig.tiny(SEED));
        try (KVStore store = KVStores.open(uri);
             KVStoreConnector dc = KVStoreConnector.builder(store, weights.config().kvLayout())
                     .modelId(weights.config().modelId()).build();
             Engine decode = Engine.builder(weights).role(KVRole.CONSUMER, dc).build();
             Engine single = Engine.builder(weights).build();
             HttpClient http = HttpClient.newHttpClient()) {
            URI producer = listeningUri(p);
            String prompt = "Two processes, one shared-memory store.";
            ObjectNode toP = JSON.createObjectNode().put("prompt", prompt).put("max_tokens", 1).put("stream", false);
            toP.putObject("kv_transfer_params").put("do_remote_decode", true);
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(producer.resolve("/v1/completions"))
                    .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(toP.toString()))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            JsonNode params = JSON.readTree(r.body()).get("kv_transfer_params");
            assertTrue(params.get("do_remote_prefill").asBoolean(), params.toString());

            int[] ids = ByteTokenizer.encode(prompt);
            Generation d = decode.generate(ids, 10, KVTransferParams.fromJsonNode(params), t -> { });

            assertArrayEquals(single.generate(ids, 10).tokens(), d.tokens());
            assertEquals(Generation.PrefillSource.LOADED, d.prefill());
            assertEquals(0, decode.metrics().prefillPasses());
        } finally {
            p.destroy();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
            }
        }
    }

    /** Reads the child's stdout until it prints where it listens (class loading is slow on a busy machine). */
    private static URI listeningUri(Process p) throws Exception {
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = CompletableFuture.supplyAsync(() -> {
            try {
                for (String l = out.readLine(); l != null; l = out.readLine()) {
                    if (l.contains(" listening on ")) {
                        return l;
                    }
                }
                return null;
            } catch (IOException e) {
                return null;
            }
        }).get(90, TimeUnit.SECONDS);
        assertNotNull(line, "the producer process exited before it listened (exit " + (p.isAlive() ? "-" : p.exitValue())
                + ")");
        return URI.create(line.substring(line.indexOf(" listening on ") + " listening on ".length()).trim());
    }
}
