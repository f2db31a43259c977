package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The concurrent flow when its prefill fails: D answers either way; P retries under the same transfer id, and D is
 * told where the prefill moved, so that a peer-to-peer D takes the KV from the new P.
 */
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
    void aRetriedConcurrentPrefillIsAnnouncedToDNamingTheNewPAndTheTransferId() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        // A peer-to-peer D waits for the KV until it learns where the prefill went.
        var d = instance("d");
        d.answerWhen(() -> !d.prefillMoves().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).prefill(p1.address(), p2.address())
                .decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        assertEquals(1, d.prefillMoves().size(), d.prefillMoves().toString());
        JsonNode notice = d.prefillMoves().getFirst();
        assertEquals(id, notice.path("transfer_id").asText());
        assertEquals("127.0.0.1", notice.path("remote_host").asText());
        assertEquals(p2.port(), notice.path("remote_port").asInt(), "the notice names the P of the retry");
        JsonNode toD = d.completions().getFirst().body().path("kv_transfer_params");
        assertEquals(p1.port(), toD.path("remote_port").asInt());
        assertTrue(toD.path("kvc_prefill_may_move").asBoolean(), toD.toString());
        awaitMetric(proxy, "xpyd_proxy_prefill_moves_announced_total 1");
    }

    @Test
    void aConcurrentPrefillThatEveryPFailsIsAnnouncedToDAsGivenUp() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2").failNext(1, 500);
        var d = instance("d");
        d.answerWhen(() -> d.prefillMoves().size() == 2);
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).maxPrefillAttempts(2)
                .prefill(p1.address(), p2.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        String id = res.headers().firstValue("X-Request-Id").orElseThrow();
        assertEquals(2, d.prefillMoves().size(), d.prefillMoves().toString());
        assertEquals(p2.port(), d.prefillMoves().get(0).path("remote_port").asInt());
        JsonNode givenUp = d.prefillMoves().get(1);
        assertEquals(id, givenUp.path("transfer_id").asText());
        assertTrue(givenUp.path("kvc_prefill_abandoned").asBoolean(), givenUp.toString());
        assertFalse(givenUp.has("remote_host"), givenUp.toString());
        awaitMetric(proxy, "xpyd_proxy_decode_only_total 1");
        awaitMetric(proxy, "xpyd_proxy_prefill_moves_announced_total 1");
    }

    @Test
    void aConcurrentPrefillThatSucceedsFirstIsNeverAnnouncedToD() throws Exception {
        var p1 = instance("p1");
        var d = instance("d").answerWhen(() -> !p1.completions().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).prefill(p1.address(), instance("p2").address())
                .decode(d.address()));

        assertEquals(200, post(proxy, "/v1/completions", PROMPT).statusCode());

        FlowRequestBodiesTest.awaitCount(p1, 1);
        awaitTrue(() -> p1.completed.get() == 1, "P answered");
        assertTrue(d.prefillMoves().isEmpty(), "no retry, no notice: " + d.prefillMoves());
        awaitMetric(proxy, "xpyd_proxy_prefill_moves_announced_total 0");
    }

    @Test
    void aRetriedPrefillInTheV1FlowIsNotAnnouncedToD() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).prefill(p1.address(), p2.address()).decode(d.address()));

        assertEquals(200, post(proxy, "/v1/completions", PROMPT).statusCode());

        assertEquals(1, p2.completions().size(), "the prefill was retried");
        assertTrue(d.prefillMoves().isEmpty(), "D gets the new P's own params in v1: " + d.prefillMoves());
        assertFalse(d.completions().getFirst().body().path("kv_transfer_params").has("kvc_prefill_may_move"));
    }

    @Test
    void aDThatRefusesTheNoticeStillAnswersAndIsNotCounted() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        var d = instance("d").prefillMoveStatus(404);
        d.answerWhen(() -> !d.prefillMoves().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).prefill(p1.address(), p2.address())
                .decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertEquals("answer from d", json(res.body()).at("/choices/0/text").asText());
        assertEquals(1, d.prefillMoves().size());
        awaitMetric(proxy, "xpyd_proxy_prefill_moves_announced_total 0");
    }

    @Test
    void decodeAnswersWhenTheConcurrentPrefillFailsInDecodeOnlyModeAndIsToldItWasGivenUp() throws Exception {
        var p1 = instance("p1").failNext(1, 500);
        var p2 = instance("p2");
        var d = instance("d");
        // D answers once told: a D waiting layer-wise would otherwise wait out its layer timeout.
        d.answerWhen(() -> !d.prefillMoves().isEmpty());
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).onPrefillFailure(PrefillFailureMode.DECODE_ONLY)
                .prefill(p1.address(), p2.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", PROMPT);

        assertEquals(200, res.statusCode());
        assertEquals("answer from d", json(res.body()).at("/choices/0/text").asText());
        assertEquals(1, p1.completions().size());
        assertEquals(0, p2.completions().size(), "decode-only mode does not retry the prefill");
        awaitMetric(proxy, "xpyd_proxy_decode_only_total 1");
        assertEquals(1, d.prefillMoves().size(), d.prefillMoves().toString());
        JsonNode givenUp = d.prefillMoves().getFirst();
        assertEquals(res.headers().firstValue("X-Request-Id").orElseThrow(), givenUp.path("transfer_id").asText());
        assertTrue(givenUp.path("kvc_prefill_abandoned").asBoolean(), givenUp.toString());
        assertFalse(givenUp.has("remote_host"), "a prefill that is not retried moves nowhere: " + givenUp);
        assertFalse(d.completions().getFirst().body().path("kv_transfer_params").has("kvc_prefill_may_move"),
                "decode-only mode never moves the prefill");
    }

    @Test
    void aRequestForWhichNoPCanBePickedTellsDInItsParamsThatNoPrefillComes() throws Exception {
        var d = instance("d");
        String dead = "127.0.0.1:" + FailureHandlingTest.freePort();
        XpydProxy proxy = start(config().flow(ProxyFlow.CONCURRENT).healthInterval(Duration.ofHours(1))
                .startupCheck(StartupCheck.OFF).prefill(dead).decode(d.address()));
        // The first request cannot connect to the only P, which is ejected until a probe readmits it.
        assertEquals(200, post(proxy, "/v1/completions", PROMPT).statusCode());
        assertFalse(proxy.pool.list(Role.PREFILL).getFirst().healthy());

        assertEquals(200, post(proxy, "/v1/completions", PROMPT).statusCode());

        JsonNode first = d.completions().get(0).body().path("kv_transfer_params");
        assertTrue(first.has("remote_host") && !first.has("kvc_prefill_abandoned"), first.toString());
        JsonNode kv = d.completions().get(1).body().path("kv_transfer_params");
        assertTrue(kv.path("kvc_prefill_abandoned").asBoolean(), kv.toString());
        assertFalse(kv.has("remote_host"), kv.toString());
    }

    private void awaitMetric(XpydProxy proxy, String line) throws InterruptedException {
        awaitTrue(() -> {
            try {
                return get(proxy, "/metrics").body().contains(line);
            } catch (Exception e) {
                return false;
            }
        }, line);
    }
}
