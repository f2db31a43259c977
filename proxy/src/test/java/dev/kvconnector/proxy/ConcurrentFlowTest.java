package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The concurrent flow when its prefill fails: D answers either way; P retries under the same transfer id. */
class ConcurrentFlowTest extends ProxyTestBase {

    private static final String PROMPT = "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":4}";

    @Test
    void failedConcurrentPrefillIsRetriedWithTheSameTransferId() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        // D outlasts P1's failure and P2's retry, as a layer-wise D waiting for the transfer would.
        var d = instance("d").answerWhen(() -> !p2.completions().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).prefill(p1.address(), p2.address())
                .decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        FlowRequestBodiesTest.awaitCount(p2, 1);
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        assertEquals(id, p1.completions().getFirst().body().at("/kv_transfer_params/transfer_id").asText());
        assertEquals(id, p2.completions().getFirst().body().at("/kv_transfer_params/transfer_id").asText());
        assertEquals(id, d.completions().getFirst().body().at("/kv_transfer_params/transfer_id").asText());
        assertEquals(p1.port(), d.completions().getFirst().body().at("/kv_transfer_params/remote_port").asInt(),
                "D is told of the P of the first attempt, the only one known when D starts");
    }

    @Test
    void decodeAnswersWhenTheConcurrentPrefillFailsInDecodeOnlyMode() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        var d = instance("d").stall(300).answerWhen(() -> !p1.completions().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).onPrefillFailure(PrefillFailureMode.DECODE_ONLY)
                .prefill(p1.address(), p2.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertEquals("answer from d", json(res.body()).at("/choices/0/text").asText());
        assertEquals(1, p1.completions().size());
        assertEquals(0, p2.completions().size(), "decode-only mode does not retry the prefill");
        awaitTrue(() -> {
            try {
                return get(proxy, "/metrics").body().contains("xpyd_proxy_decode_only_total 1");
            } catch (Exception e) {
                return false;
            }
        }, "decode-only counted");
    }
}
