package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.proxy.XpydProxy;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

/** A completion through the proxy, by token ids, as the end-to-end demo tests send it. */
final class ProxyTestClient {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ProxyTestClient() {
    }

    /** Completes {@code prompt} through {@code proxy}, not streamed; the answer must be a 200. */
    static JsonNode complete(HttpClient http, XpydProxy proxy, String model, int maxTokens, int[] prompt)
            throws Exception {
        ObjectNode body = JSON.createObjectNode().put("model", model).put("max_tokens", maxTokens)
                .put("stream", false);
        var ids = body.putArray("prompt");
        for (int t : prompt) {
            ids.add(t);
        }
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(proxy.uri().resolve("/v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body.toString()))
                .build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return JSON.readTree(r.body());
    }

    /** The token ids of the answer's first choice. */
    static int[] tokenIds(JsonNode answer) {
        JsonNode ids = answer.at("/choices/0/token_ids");
        int[] out = new int[ids.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ids.get(i).asInt();
        }
        return out;
    }
}
