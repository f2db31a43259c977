package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Retries, fallbacks, timeouts and the errors clients see; exactly one answer per request. */
class FailureHandlingTest extends ProxyTestBase {

    private static final String PROMPT = "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":4}";

    @Test
    void failedPrefillIsRetriedOnAnotherPrefill() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).prefill(p1.address(), p2.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertEquals(1, p1.completions().size());
        assertEquals(1, p2.completions().size());
        assertEquals("engine-p2", d.completions().getFirst().body().at("/kv_transfer_params/remote_engine_id").asText());
        assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_prefill_retries_total 1"));
    }

    @Test
    void prefillRetriesExhaustedGiveA502NamingTheInstance() throws Exception {
        var p = instance("p").failNext(5, 503);
        var d = instance("d");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(502, res.statusCode());
        JsonNode err = json(res.body()).get("error");
        assertEquals("upstream_error", err.get("type").asText());
        assertEquals(502, err.get("code").asInt());
        assertTrue(err.get("message").asText().contains(p.address()), err.toString());
        assertTrue(err.get("message").asText().contains("503"), err.toString());
        assertEquals(0, d.completions().size());
    }

    @Test
    void decodeOnlyModeLetsDecodeComputeAloneWhenPrefillIsDown() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).onPrefillFailure(PrefillFailureMode.DECODE_ONLY)
                .startupCheck(StartupCheck.OFF).prefill("127.0.0.1:" + freePort()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertFalse(d.completions().getFirst().body().has("kv_transfer_params"));
        assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_decode_only_total 1"));
    }

    @Test
    void prefillWithoutKvTransferParamsCountsAsAFailure() throws Exception {
        var p = instance("p").omitKvTransferParams();
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).maxPrefillAttempts(1).prefill(p.address())
                .decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(502, res.statusCode());
        assertTrue(res.body().contains("kv_transfer_params"), res.body());
    }

    @Test
    void prefillClientErrorIsPassedThroughWithoutDecode() throws Exception {
        var p = instance("p").failNext(1, 400);
        var d = instance("d");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(400, res.statusCode());
        assertTrue(res.body().contains("p failed on purpose"));
        assertEquals(0, d.completions().size());
    }

    @Test
    void decode5xxIsRetriedOnAnotherDecodeAndNeverStreamedAsSuccess() throws Exception {
        var p = instance("p");
        var d1 = instance("d1").failNext(1, 500);
        var d2 = instance("d2").stream(2, 0);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d1.address(), d2.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions",
                "{\"model\":\"test-model\",\"prompt\":\"hi\",\"stream\":true}");

        assertEquals(200, res.statusCode());
        assertEquals(d2.chunk(0, false) + d2.chunk(1, false) + "data: [DONE]\n\n", res.body());
        assertEquals(1, d1.completions().size());
        assertEquals(1, d2.completions().size());
    }

    @Test
    void decodeStalledBeforeFirstByteTimesOutAndMovesOn() throws Exception {
        var p = instance("p");
        var d1 = instance("d1").stall(3_000);
        var d2 = instance("d2");
        XpydProxy proxy = start(config().firstByteTimeout(Duration.ofMillis(300)).prefill(p.address())
                .decode(d1.address(), d2.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertEquals("answer from d2", json(res.body()).at("/choices/0/text").asText());
        assertTrue(get(proxy, "/metrics").body().contains(
                "xpyd_instance_timeouts_total{role=\"decode\",instance=\"" + d1.address() + "\"} 1"));
    }

    @Test
    void streamOutlastingTheTotalTimeoutEndsWithATimeoutErrorEvent() throws Exception {
        var p = instance("p");
        var d = instance("d").stream(50, 100);
        XpydProxy proxy = start(config().totalTimeout(Duration.ofMillis(800)).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions",
                "{\"model\":\"test-model\",\"prompt\":\"hi\",\"stream\":true}");

        assertEquals(200, res.statusCode());
        assertTrue(res.body().startsWith(d.chunk(0, false)), res.body());
        assertTrue(res.body().contains("timed out"), res.body());
        assertFalse(res.body().contains("[DONE]"));
        assertTrue(d.sawDisconnect.await(5, java.util.concurrent.TimeUnit.SECONDS), "slow decode was not cancelled");
        assertTrue(get(proxy, "/metrics").body().contains(
                "xpyd_instance_timeouts_total{role=\"decode\",instance=\"" + d.address() + "\"} 1"));
    }

    @Test
    void manyConcurrentClientsEachGetExactlyTheirOwnAnswer() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d1 = instance("d1").stream(3, 1);
        var d2 = instance("d2").stream(3, 1);
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).policy(Policy.LEAST_OUTSTANDING)
                .prefill(p1.address(), p2.address()).decode(d1.address(), d2.address()));
        int clients = 40;
        java.util.List<java.util.concurrent.Future<HttpResponse<String>>> answers = new java.util.ArrayList<>();
        try (var pool = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
            for (int k = 0; k < clients; k++) {
                boolean streamed = k % 2 == 0;
                answers.add(pool.submit(() -> post(proxy, "/v1/completions",
                        "{\"model\":\"test-model\",\"prompt\":\"q\",\"stream\":" + streamed + "}")));
            }
        }
        java.util.Set<String> ids = new java.util.HashSet<>();
        for (int k = 0; k < clients; k++) {
            HttpResponse<String> res = answers.get(k).get();
            assertEquals(200, res.statusCode());
            ids.add(res.headers().firstValue("X-Request-Id").orElseThrow());
            if (k % 2 == 0) {
                assertTrue(res.body().endsWith("data: [DONE]\n\n"), res.body());
            } else {
                assertTrue(res.body().contains("answer from d"), res.body());
            }
        }
        assertEquals(clients, ids.size());
        assertEquals(clients, p1.completions().size() + p2.completions().size());
        assertEquals(clients, d1.completions().size() + d2.completions().size());
        java.util.Set<String> decoded = new java.util.HashSet<>();
        for (var d : java.util.List.of(d1, d2)) {
            d.completions().forEach(r -> decoded.add(r.body().get("request_id").asText()));
        }
        assertEquals(ids, decoded, "each client's request reached a decode instance exactly once");
    }

    @Test
    void everyDecodeFailingGivesOneOpenAiStyleError() throws Exception {
        var p = instance("p");
        var d1 = instance("d1").failNext(9, 500);
        var d2 = instance("d2").failNext(9, 502);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d1.address(), d2.address()));

        HttpResponse<String> res = post(proxy, "/v1/chat/completions", "{\"model\":\"test-model\",\"messages\":"
                + "[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}");

        assertEquals(502, res.statusCode());
        assertEquals("application/json", res.headers().firstValue("Content-Type").orElseThrow());
        JsonNode err = json(res.body()).get("error");
        assertEquals("upstream_error", err.get("type").asText());
        assertEquals(1, d1.completions().size());
        assertEquals(1, d2.completions().size());
    }

    @Test
    void unreachableDecodeIsSkipped() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().startupCheck(StartupCheck.OFF).policy(Policy.ROUND_ROBIN)
                .prefill(p.address()).decode("127.0.0.1:" + freePort(), d.address()));

        for (int k = 0; k < 4; k++) {
            assertEquals(200, post(proxy, "/v1/completions", PROMPT).statusCode());
        }
        assertEquals(4, d.completions().size());
    }

    @Test
    void decodeClientErrorPassesThroughOnce() throws Exception {
        var p = instance("p");
        var d1 = instance("d1").failNext(1, 404);
        var d2 = instance("d2");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d1.address(), d2.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(404, res.statusCode());
        assertEquals(0, d2.completions().size());
    }

    @Test
    void noHealthyPrefillGives503InRetryMode() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(503, res.statusCode());
        assertEquals("service_unavailable", json(res.body()).at("/error/type").asText());
    }

    @Test
    void nonJsonContentTypeGets415() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().decode(d.address()));

        HttpResponse<String> res = http.send(HttpRequest.newBuilder(uri(proxy, "/v1/completions"))
                .header("Content-Type", "text/plain").POST(HttpRequest.BodyPublishers.ofString(PROMPT)).build(),
                HttpResponse.BodyHandlers.ofString());

        assertEquals(415, res.statusCode());
        assertTrue(json(res.body()).at("/error/message").asText().contains("text/plain"));
        assertEquals(0, d.completions().size());
    }

    @Test
    void bodyThatIsNotJsonGets415AndJsonThatIsNoObjectGets400() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().decode(d.address()));

        assertEquals(415, post(proxy, "/v1/completions", "{\"prompt\": tru").statusCode());
        assertEquals(415, post(proxy, "/v1/completions", "").statusCode());
        assertEquals(400, post(proxy, "/v1/completions", "[1,2]").statusCode());
        assertEquals(0, d.completions().size());
    }

    @Test
    void oversizedBodyGets413() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().maxRequestBytes(1024).decode(d.address()));
        String big = "{\"prompt\":\"" + "x".repeat(4096) + "\"}";

        assertEquals(413, post(proxy, "/v1/completions", big).statusCode());
        // Without a Content-Length the limit still holds while reading.
        HttpResponse<String> chunked = http.send(HttpRequest.newBuilder(uri(proxy, "/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new java.io.ByteArrayInputStream(big.getBytes())))
                .build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(413, chunked.statusCode());
        assertEquals("invalid_request_error", json(chunked.body()).at("/error/type").asText());
        assertEquals(0, d.completions().size());
    }

    /**
     * A client still sending a body far over the limit reads the whole 413: the proxy drains the rest instead of
     * closing at once, which would make the kernel answer the unread bytes with a reset.
     */
    @Test
    void clientStillSendingAnOversizedBodyReadsThe413() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().maxRequestBytes(1024).decode(d.address()));
        int bodyBytes = 8 << 20;

        for (int round = 0; round < 3; round++) {
            try (var socket = new java.net.Socket(proxy.uri().getHost(), proxy.uri().getPort())) {
                socket.setSoTimeout(10_000);
                var out = socket.getOutputStream();
                out.write(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + "Content-Length: " + bodyBytes + "\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                Thread writer = Thread.ofPlatform().start(() -> {
                    byte[] chunk = new byte[64 << 10];
                    try {
                        for (int sent = 0; sent < bodyBytes; sent += chunk.length) {
                            out.write(chunk);
                        }
                    } catch (java.io.IOException closed) {
                        // The proxy may close once it has drained for its linger time; the answer is what counts.
                    }
                });
                String answer = new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII);
                writer.join();
                assertTrue(answer.startsWith("HTTP/1.1 413"), answer);
                assertTrue(answer.contains("--max-request-bytes"), answer);
            }
        }
        assertEquals(0, d.completions().size());
    }

    @Test
    void wrongMethodAndUnknownPathGetJsonErrors() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().decode(d.address()));

        assertEquals(405, get(proxy, "/v1/completions").statusCode());
        HttpResponse<String> missing = get(proxy, "/v2/nothing");
        assertEquals(404, missing.statusCode());
        assertEquals(404, json(missing.body()).at("/error/code").asInt());
    }

    static int freePort() throws java.io.IOException {
        try (var s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
