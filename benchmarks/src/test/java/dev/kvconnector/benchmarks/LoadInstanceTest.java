package dev.kvconnector.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The load test's instance double answers as vLLM would and reports the pacing it really did. */
class LoadInstanceTest {
    private static final long TOKEN_MS = 5;

    @Test
    void streamsEightPacedEventsReportingThePacingAndEndsWithDone() throws Exception {
        try (LoadInstance d = new LoadInstance(TOKEN_MS); HttpClient http = HttpClient.newHttpClient()) {
            long t0 = System.nanoTime();
            HttpResponse<String> r = post(http, d, "{\"model\":\"" + LoadInstance.MODEL + "\",\"stream\":true}");
            long took = System.nanoTime() - t0;
            assertEquals(200, r.statusCode());
            assertEquals("text/event-stream", r.headers().firstValue("content-type").orElseThrow());
            List<String> events = List.of(r.body().split("\n\n"));
            assertEquals(LoadInstance.TOKENS + 1, events.size(), r.body());
            for (int i = 0; i < LoadInstance.TOKENS; i++) {
                assertTrue(events.get(i).startsWith("data: {\"choices\":[{\"index\":0,\"text\":\"t" + i + "\"}]"),
                        events.get(i));
            }
            assertEquals("data: [DONE]", events.get(LoadInstance.TOKENS));
            byte[] body = r.body().getBytes(StandardCharsets.US_ASCII);
            long paced = ProxyLoadTest.pacedNanos(body, body.length, "the double");
            assertTrue(paced >= TimeUnit.MILLISECONDS.toNanos(LoadInstance.TOKENS * TOKEN_MS),
                    "eight timers of " + TOKEN_MS + " ms took at least their sum: " + paced + " ns");
            assertTrue(paced <= took, "the pacing (" + paced + " ns) is part of the request (" + took + " ns)");
        }
    }

    @Test
    void streamsAsManyEventsAsMaxTokensAsksForAtMostEight() throws Exception {
        try (LoadInstance p = new LoadInstance(0); HttpClient http = HttpClient.newHttpClient()) {
            String one = post(http, p, "{\"model\":\"" + LoadInstance.MODEL + "\",\"max_tokens\":1,\"stream\":true}")
                    .body();
            assertEquals("data: {\"choices\":[{\"index\":0,\"text\":\"t0\"}],\"paced_ns\":0}\n\ndata: [DONE]\n\n", one);
            String many = post(http, p, "{\"model\":\"" + LoadInstance.MODEL + "\",\"max_tokens\":100,\"stream\":true}")
                    .body();
            assertEquals(LoadInstance.TOKENS + 1, many.split("\n\n").length, many);
        }
    }

    @Test
    void answersAPrefillWithOneTokenAndListsItsModel() throws Exception {
        try (LoadInstance p = new LoadInstance(0); HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> r = post(http, p, "{\"model\":\"" + LoadInstance.MODEL + "\",\"max_tokens\":1}");
            assertEquals(200, r.statusCode());
            assertTrue(r.body().contains("\"text\":\"x\",\"finish_reason\":\"length\""), r.body());
            HttpResponse<String> models = http.send(HttpRequest.newBuilder(uri(p, "/v1/models")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertTrue(models.body().contains("\"id\":\"" + LoadInstance.MODEL + "\""), models.body());
            assertEquals(404, http.send(HttpRequest.newBuilder(uri(p, "/nowhere")).build(),
                    HttpResponse.BodyHandlers.ofString()).statusCode());
        }
    }

    private static HttpResponse<String> post(HttpClient http, LoadInstance to, String json)
            throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(uri(to, "/v1/completions")).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static URI uri(LoadInstance i, String path) {
        return URI.create("http://127.0.0.1:" + i.port() + path);
    }
}
