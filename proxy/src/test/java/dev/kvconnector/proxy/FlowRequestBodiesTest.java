package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The exact bodies each flow sends to the prefill and the decode instance. */
class FlowRequestBodiesTest extends ProxyTestBase {

    private static final String CLIENT = "{\"model\":\"test-model\",\"prompt\":\"hello world\",\"max_tokens\":16,"
            + "\"temperature\":0.5}";

    @Test
    void v0SendsPrefillACopyWithOneTokenAndDecodeTheOriginal() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V0).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", CLIENT);

        assertEquals(200, res.statusCode());
        assertEquals("answer from d", json(res.body()).at("/choices/0/text").asText());
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        assertEquals(json("{\"model\":\"test-model\",\"prompt\":\"hello world\",\"max_tokens\":1,"
                + "\"temperature\":0.5,\"request_id\":\"" + id + "\"}"), p.completions().getFirst().body());
        assertEquals(json("{\"model\":\"test-model\",\"prompt\":\"hello world\",\"max_tokens\":16,"
                + "\"temperature\":0.5,\"request_id\":\"" + id + "\"}"), d.completions().getFirst().body());
        assertEquals(id, p.completions().getFirst().requestIdHeader());
        assertEquals(id, d.completions().getFirst().requestIdHeader());
    }

    @Test
    void v0CapsMaxCompletionTokensWhenPresentAndKeepsStreamForPrefill() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V0).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/chat/completions", "{\"model\":\"test-model\",\"messages\":"
                + "[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":50,\"stream\":true}");

        assertEquals(200, res.statusCode());
        JsonNode pb = p.completions().getFirst().body();
        assertEquals(1, pb.get("max_tokens").asInt());
        assertEquals(1, pb.get("max_completion_tokens").asInt());
        assertTrue(pb.get("stream").asBoolean());
        assertEquals(50, d.completions().getFirst().body().get("max_completion_tokens").asInt());
        assertEquals("/v1/chat/completions", p.completions().getFirst().path());
    }

    @Test
    void v1SendsPrefillRemoteDecodeParamsAndCopiesItsAnswerIntoDecode() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", "{\"model\":\"test-model\",\"prompt\":\"hello\","
                + "\"max_tokens\":16,\"stream\":true,\"stream_options\":{\"include_usage\":true}}");

        assertEquals(200, res.statusCode());
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        assertEquals(json("{\"model\":\"test-model\",\"prompt\":\"hello\",\"max_tokens\":1,\"stream\":false,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false},"
                + "\"request_id\":\"" + id + "\"}"), p.completions().getFirst().body());
        assertEquals(json("{\"model\":\"test-model\",\"prompt\":\"hello\",\"max_tokens\":16,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true},\"request_id\":\"" + id + "\","
                + "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
                + "\"remote_engine_id\":\"engine-p\",\"remote_block_ids\":[1,2,3],\"remote_host\":\"127.0.0.1\","
                + "\"remote_port\":" + p.port() + ",\"remote_request_id\":\"" + id + "\",\"tp_size\":1}}"),
                d.completions().getFirst().body());
    }

    @Test
    void concurrentSendsBothAtOnceWithASharedTransferIdAndTellsDWhereP() throws Exception {
        var prefillHeld = new java.util.concurrent.CountDownLatch(1);
        var p = instance("p").holdUntil(prefillHeld);
        var d = instance("d").answerWhen(() -> !p.completions().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res;
        try {
            res = post(proxy, "/v1/completions", CLIENT);
            // The client has D's answer while P still holds its request: D never waited for P.
            awaitCount(p, 1);
            assertEquals(0, p.completed.get());
        } finally {
            prefillHeld.countDown();
        }

        assertEquals(200, res.statusCode());
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        ObjectNode expectedD = (ObjectNode) json(CLIENT);
        expectedD.put("request_id", id);
        expectedD.putObject("kv_transfer_params").put("transfer_id", id).put("do_remote_decode", false)
                .put("do_remote_prefill", true).put("remote_host", "127.0.0.1").put("remote_port", p.port())
                .put("kvc_prefill_may_move", true);
        assertEquals(expectedD, d.completions().getFirst().body());
        awaitCount(p, 1);
        assertEquals(json("{\"model\":\"test-model\",\"prompt\":\"hello world\",\"max_tokens\":1,"
                + "\"temperature\":0.5,\"stream\":false,\"kv_transfer_params\":{\"transfer_id\":\"" + id + "\","
                + "\"do_remote_decode\":true,\"do_remote_prefill\":false},\"request_id\":\"" + id + "\"}"),
                p.completions().getFirst().body());
    }

    @Test
    void eachRequestGetsItsOwnIdAndAuthorizationIsForwarded() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        for (int k = 0; k < 3; k++) {
            http.send(java.net.http.HttpRequest.newBuilder(uri(proxy, "/v1/completions"))
                    .header("Content-Type", "application/json").header("Authorization", "Bearer sk-test")
                    .POST(java.net.http.HttpRequest.BodyPublishers.ofString(CLIENT)).build(),
                    HttpResponse.BodyHandlers.discarding());
        }

        assertEquals(3, d.completions().stream().map(r -> r.body().get("request_id").asText()).distinct().count());
        assertEquals("Bearer sk-test", p.completions().getFirst().authorization());
        assertEquals("Bearer sk-test", d.completions().getFirst().authorization());
    }

    static void awaitCount(VllmInstanceTestDouble d, int n) throws InterruptedException {
        long end = System.nanoTime() + 5_000_000_000L;
        while (d.completions().size() < n && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertEquals(n, d.completions().size(), d.name + " received");
    }
}
