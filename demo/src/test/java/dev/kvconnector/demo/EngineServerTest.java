package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The OpenAI-compatible server over real HTTP on 127.0.0.1. */
class EngineServerTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(5));
    private static Engine engine;
    private static EngineServer server;
    private static HttpClient http;

    @BeforeAll
    static void start() {
        engine = Engine.builder(WEIGHTS).build();
        server = EngineServer.start(engine, "127.0.0.1", 0, "kvc-demo");
        http = HttpClient.newHttpClient();
    }

    @AfterAll
    static void stop() {
        http.close();
        server.close();
        engine.close();
    }

    private static HttpResponse<String> post(URI base, String body, String contentType) throws Exception {
        HttpRequest r = HttpRequest.newBuilder(base.resolve("/v1/completions")).header("Content-Type", contentType)
                .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        return http.send(r, HttpResponse.BodyHandlers.ofString());
    }

    private static ObjectNode request(String prompt, int maxTokens, boolean stream) {
        return JSON.createObjectNode().put("model", "kvc-demo").put("prompt", prompt).put("max_tokens", maxTokens)
                .put("stream", stream);
    }

    /** The data payloads of an SSE body, checking each event's framing. */
    private static List<String> events(String body) {
        List<String> out = new ArrayList<>();
        for (String e : body.split("\n\n")) {
            assertTrue(e.startsWith("data: "), "event framing: " + e);
            out.add(e.substring(6));
        }
        assertTrue(body.endsWith("\n\n"));
        return out;
    }

    private static String streamedText(String body) throws IOException {
        List<String> events = events(body);
        assertEquals("[DONE]", events.getLast());
        StringBuilder text = new StringBuilder();
        for (String e : events.subList(0, events.size() - 1)) {
            text.append(JSON.readTree(e).at("/choices/0/text").asText());
        }
        assertEquals("length", JSON.readTree(events.get(events.size() - 2)).at("/choices/0/finish_reason").asText());
        return text.toString();
    }

    @Test
    void streamingAndNonStreamingReturnTheSameText() throws Exception {
        String prompt = "Stream me, or don't: ";
        HttpResponse<String> whole = post(server.baseUri(), request(prompt, 20, false).toString(), "application/json");
        assertEquals(200, whole.statusCode(), whole.body());
        JsonNode body = JSON.readTree(whole.body());
        assertEquals("text_completion", body.get("object").asText());
        assertEquals(20, body.at("/usage/completion_tokens").asInt());
        assertEquals(ByteTokenizer.encode(prompt).length, body.at("/usage/prompt_tokens").asInt());
        String text = body.at("/choices/0/text").asText();
        assertEquals(ByteTokenizer.decode(engine.generate(ByteTokenizer.encode(prompt), 20).tokens()), text);

        HttpResponse<String> streamed = post(server.baseUri(), request(prompt, 20, true).toString(), "application/json");
        assertEquals(200, streamed.statusCode());
        assertEquals("text/event-stream", streamed.headers().firstValue("Content-Type").orElse(""));
        assertEquals(text, streamedText(streamed.body()));
    }

    @Test
    void modelsListsTheServedModelAndHealthIsOk() throws Exception {
        HttpResponse<String> models = http.send(HttpRequest.newBuilder(server.baseUri().resolve("/v1/models")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, models.statusCode());
        JsonNode m = JSON.readTree(models.body());
        assertEquals("kvc-demo", m.at("/data/0/id").asText());
        assertEquals(WEIGHTS.config().maxContext(), m.at("/data/0/max_model_len").asInt());
        HttpResponse<String> health = http.send(HttpRequest.newBuilder(server.baseUri().resolve("/health")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, health.statusCode());
        assertEquals("", health.body());
    }

    @Test
    void badRequestsGetOpenAiErrorsWithStatus() throws Exception {
        URI base = server.baseUri();
        assertStatus(400, post(base, "{not json", "application/json"), "not JSON");
        assertStatus(400, post(base, "{\"max_tokens\": 3}", "application/json"), "prompt");
        assertStatus(400, post(base, "{\"prompt\": \"x\", \"max_tokens\": \"many\"}", "application/json"), "max_tokens");
        assertStatus(400, post(base, "{\"prompt\": \"x\", \"max_tokens\": 100000}", "application/json"), "context");
        assertStatus(400, post(base, "{\"prompt\": [1, 999], \"max_tokens\": 1}", "application/json"), "vocabulary");
        assertStatus(400, post(base, "{\"prompt\": \"x\", \"kv_transfer_params\": {\"remote_port\": \"high\"}}",
                "application/json"), "remote_port");
        assertStatus(404, post(base, "{\"model\": \"gpt-9\", \"prompt\": \"x\"}", "application/json"), "gpt-9");
        assertStatus(415, post(base, "{\"prompt\": \"x\"}", "text/plain"), "application/json");
        HttpResponse<String> get = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(405, get.statusCode());
    }

    private static void assertStatus(int status, HttpResponse<String> r, String mentions) throws IOException {
        assertEquals(status, r.statusCode(), r.body());
        JsonNode err = JSON.readTree(r.body()).get("error");
        assertEquals(status, err.get("code").asInt());
        assertTrue(err.get("message").asText().contains(mentions), err.toString());
    }

    @Test
    void prefillThenDecodeOverHttpAsTheProxyDoesIt() throws Exception {
        String prompt = "A proxied request: P with max_tokens=1, then D with P's kv_transfer_params.";
        try (PrefillDecode pd = new PrefillDecode()) {
            HttpResponse<String> pr = pd.prefill(prompt);
            assertEquals(200, pr.statusCode(), pr.body());
            JsonNode params = JSON.readTree(pr.body()).get("kv_transfer_params");
            assertTrue(params.get("do_remote_prefill").asBoolean());
            assertFalse(params.get("transfer_id").asText().isEmpty());
            assertEquals(pd.ps.port(), params.get("remote_port").asInt());

            ObjectNode toD = request(prompt, 16, true);
            toD.set("kv_transfer_params", params);
            HttpResponse<String> dr = post(pd.ds.baseUri(), toD.toString(), "application/json");
            assertEquals(200, dr.statusCode(), dr.body());

            String expected = ByteTokenizer.decode(engine.generate(ByteTokenizer.encode(prompt), 16).tokens());
            assertEquals(expected, streamedText(dr.body()));
            assertEquals(0, pd.d.metrics().prefillPasses());
            assertEquals(1, pd.dc.metrics().hits());

            JsonNode dm = JSON.readTree(http.send(HttpRequest.newBuilder(pd.ds.baseUri().resolve("/kv/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body());
            assertEquals("kv_consumer", dm.get("role").asText());
            assertEquals(0, dm.at("/engine/prefill_passes").asInt());
            assertEquals(1, dm.at("/engine/loaded_prefills").asInt());
            assertEquals(1, dm.at("/connector/hits").asInt());
            assertEquals(0, dm.at("/connector/misses/ABSENT").asInt());
            assertEquals(WEIGHTS.config().layers(), dm.at("/connector/drop_layer/count").asInt());
            JsonNode pm = JSON.readTree(http.send(HttpRequest.newBuilder(pd.ps.baseUri().resolve("/kv/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body());
            assertEquals(1, pm.at("/engine/inserts").asInt());
            assertEquals(1, pm.at("/connector/commits").asInt());
        }
    }

    @Test
    void theLoadedTokensHeaderCarriesTheDropSelectsMatchOnAHitAndZeroOnAMiss() throws Exception {
        String prompt = "A prompt whose KV the consumer loads whole from the store, then one it has never seen.";
        try (PrefillDecode pd = new PrefillDecode()) {
            HttpResponse<String> pr = pd.prefill(prompt);
            assertEquals(200, pr.statusCode(), pr.body());
            // A producer looks nothing up.
            assertEquals("0", pr.headers().firstValue(EngineServer.LOADED_TOKENS_HEADER).orElse(null));

            // A hit, streamed: the header comes with the status line, before the first token.
            ObjectNode toD = request(prompt, 4, true);
            toD.set("kv_transfer_params", JSON.readTree(pr.body()).get("kv_transfer_params"));
            HttpResponse<String> hit = post(pd.ds.baseUri(), toD.toString(), "application/json");
            assertEquals(200, hit.statusCode(), hit.body());
            assertEquals(1, pd.dc.metrics().hits());
            assertEquals(Integer.toString(ByteTokenizer.encode(prompt).length),
                    hit.headers().firstValue(EngineServer.LOADED_TOKENS_HEADER).orElse(null));

            // A miss, not streamed: nothing in the store under this transfer, the prefill is computed.
            ObjectNode miss = request("A prompt nobody stored.", 4, false);
            miss.putObject("kv_transfer_params").put("transfer_id", "never-stored").put("do_remote_prefill", true)
                    .put("do_remote_decode", false);
            HttpResponse<String> mr = post(pd.ds.baseUri(), miss.toString(), "application/json");
            assertEquals(200, mr.statusCode(), mr.body());
            assertEquals(1, pd.d.metrics().prefillPasses());
            assertEquals("0", mr.headers().firstValue(EngineServer.LOADED_TOKENS_HEADER).orElse(null));
        }
    }

    /** A producer and a consumer engine sharing one {@code memory:} store, each behind its own server, as in 1P1D. */
    private static final class PrefillDecode implements AutoCloseable {
        final KVStore store = KVStores.open("memory:?capacity=64MiB");
        final KVStoreConnector pc = connector();
        final KVStoreConnector dc = connector();
        final Engine p = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, pc).build();
        final Engine d = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dc).build();
        final EngineServer ps = EngineServer.start(p, "127.0.0.1", 0, "kvc-demo");
        final EngineServer ds = EngineServer.start(d, "127.0.0.1", 0, "kvc-demo");

        private KVStoreConnector connector() {
            return KVStoreConnector.builder(store, WEIGHTS.config().kvLayout()).modelId(WEIGHTS.config().modelId())
                    .build();
        }

        /** Sends {@code prompt} to P as the proxy does first: one token, with do_remote_decode. */
        HttpResponse<String> prefill(String prompt) throws Exception {
            ObjectNode toP = request(prompt, 1, false);
            toP.putObject("kv_transfer_params").put("do_remote_decode", true).put("do_remote_prefill", false);
            return post(ps.baseUri(), toP.toString(), "application/json");
        }

        @Override
        public void close() {
            ds.close();
            ps.close();
            d.close();
            p.close();
            dc.close();
            pc.close();
            store.close();
        }
    }
}
