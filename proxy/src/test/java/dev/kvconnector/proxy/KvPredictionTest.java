package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventSource;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The kv-aware policy's predicted against actual hits: the engines report what they loaded in the
 * {@code x-kvc-loaded-tokens} header, the proxy counts each prediction exact, over, under or unreported.
 */
class KvPredictionTest extends ProxyTestBase {
    private static final int CHUNK = 16;
    private static final byte[] ROOT = HexFormat.of().parseHex("a7".repeat(32));
    private static final String STORE = "valkey://store:6379";
    /** 67 tokens under the proxy's byte tokenizer: four full chunks and a last one of 3. */
    private static final String PROMPT = "The quick brown fox jumps over the lazy dog, then naps for a while.";

    private static List<String> hashes(String prompt) {
        return KvPrompts.chunkHashes(ROOT, CHUNK, prompt);
    }

    /** Stores the first {@code count} chunks of {@code h} in {@code medium}, as one batch numbered {@code seq}. */
    private static void store(KvEventFeed feed, long seq, List<String> h, int count, String medium) {
        List<KvEvent> events = new ArrayList<>();
        for (int c = 0; c < count; c++) {
            events.add(new KvEvent.Stored(1, seq, feed.instance, medium, null, h.get(c), c == 0 ? null : h.get(c - 1),
                    CHUNK, -1));
        }
        feed.accept(new KvEventBatch(new KvEventSource(feed.instance, 1, null, null, CHUNK,
                HexFormat.of().formatHex(ROOT)), seq, System.currentTimeMillis() / 1000.0, events));
    }

    private static String completion(boolean stream) {
        return "{\"prompt\":" + JSON.valueToTree(PROMPT) + ",\"max_tokens\":4,\"stream\":" + stream + "}";
    }

    private static long counter(String metrics, String series) {
        for (String line : metrics.split("\n")) {
            if (line.startsWith(series + " ")) {
                return Long.parseLong(line.substring(series.length() + 1).trim());
            }
        }
        throw new AssertionError(series + " not in /metrics:\n" + metrics);
    }

    @Test
    void eachPrefillsReportedHitIsCountedExactOverUnderOrUnreported() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.V1).prefill(p.address())
                .decode(d.address()));
        store(proxy.kvRouter().feed(p.address(), null), 0, hashes(PROMPT), 2, "GPU");
        int predicted = 2 * CHUNK;

        p.loadedTokens(predicted);
        assertEquals(200, post(proxy, "/v1/completions", completion(false)).statusCode());
        // A stale index: P found nothing. The request still succeeds.
        p.loadedTokens(0);
        var stale = post(proxy, "/v1/completions", completion(false));
        assertEquals(200, stale.statusCode(), stale.body());
        // P found more than the index knew (its events not yet applied).
        p.loadedTokens(predicted + CHUNK);
        assertEquals(200, post(proxy, "/v1/completions", completion(false)).statusCode());
        // An engine that reports nothing (vLLM).
        p.loadedTokens(-1);
        assertEquals(200, post(proxy, "/v1/completions", completion(false)).statusCode());
        assertEquals(4, d.completions().size());

        KvMetrics m = proxy.kvRouter().metrics;
        assertEquals(1, m.exact.sum());
        assertEquals(1, m.over.sum());
        assertEquals(1, m.under.sum());
        assertEquals(1, m.unreported.sum());
        assertEquals(3L * predicted, m.predictedTokens.sum());
        assertEquals(predicted + 0 + predicted + CHUNK, m.actualTokens.sum());

        String metrics = get(proxy, "/metrics").body();
        assertEquals(3L * predicted, counter(metrics, "xpyd_kv_predicted_tokens_total"));
        assertEquals(2L * predicted + CHUNK, counter(metrics, "xpyd_kv_actual_tokens_total"));
        for (String outcome : List.of("exact", "over", "under", "unreported")) {
            assertEquals(1, counter(metrics, "xpyd_kv_predictions_total{outcome=\"" + outcome + "\"}"), outcome);
        }
        JsonNode status = JSON.readTree(get(proxy, "/status").body()).get("kv_predictions");
        assertEquals(3L * predicted, status.get("predicted_tokens").asLong());
        assertEquals(2L * predicted + CHUNK, status.get("actual_tokens").asLong());
        assertEquals(1, status.get("exact").asLong());
        assertEquals(1, status.get("over").asLong());
        assertEquals(1, status.get("under").asLong());
        assertEquals(1, status.get("unreported").asLong());
    }

    @Test
    void theConcurrentFlowReadsThePrefillsHeaderAndAStreamedDecodeOnlyReadsDs() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.CONCURRENT).prefill(p.address())
                .decode(d.address()));
        KvEventFeed feed = proxy.kvRouter().feed(p.address(), null);
        List<String> h = hashes(PROMPT);
        store(feed, 0, h, 3, "GPU");
        p.loadedTokens(3 * CHUNK);
        KvMetrics m = proxy.kvRouter().metrics;
        // The proxy cancels a concurrent prefill that is still running when D is done, so D answers once P's header
        // has been counted.
        d.answerWhen(() -> m.exact.sum() > 0);
        var r = post(proxy, "/v1/completions", completion(true));
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(1, m.exact.sum());
        d.answerWhen(null);

        // The store holds the whole prompt: straight to D, whose streamed answer reports a stale store (a miss).
        store(feed, 1, h, h.size(), STORE);
        d.loadedTokens(0);
        r = post(proxy, "/v1/completions", completion(true));
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("[DONE]"), r.body());
        assertEquals(1, proxy.metrics.kvDecodeOnly.sum());
        assertEquals(1, m.over.sum());
        assertEquals(3 * CHUNK + PROMPT.length(), m.predictedTokens.sum());
        assertEquals(3 * CHUNK, m.actualTokens.sum());
        assertEquals(0, m.under.sum());
        assertEquals(0, m.unreported.sum());
    }

    @Test
    void aPrefillIsPredictedItsOwnCacheUpToTheChunkBeforeTheLastTokenAndNeverTheStores() throws Exception {
        var p = instance("p");
        var d = instance("d");
        // No decode-only for a stored prefix: the store's four chunks of PROMPT would otherwise send it to D alone.
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.V1).prefill(p.address())
                .decode(d.address()).kvDecodeMaxSuffix(0));
        KvEventFeed feed = proxy.kvRouter().feed(p.address(), null);
        // 64 tokens, four whole chunks, all in P's own cache: P computes the last one again for its logits.
        String whole = "0123456789abcdef".repeat(4);
        store(feed, 0, hashes(whole), 4, "GPU");
        p.loadedTokens(3 * CHUNK);
        assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"" + whole + "\",\"max_tokens\":2}")
                .statusCode());
        KvMetrics m = proxy.kvRouter().metrics;
        assertEquals(1, m.exact.sum());
        assertEquals(3 * CHUNK, m.predictedTokens.sum());

        // The store holds four chunks of PROMPT and P one: a producer reads nothing from the store.
        List<String> h = hashes(PROMPT);
        store(feed, 1, h, 1, "GPU");
        store(feed, 2, h, 4, STORE);
        p.loadedTokens(CHUNK);
        assertEquals(200, post(proxy, "/v1/completions", completion(false)).statusCode());
        assertEquals(2, m.exact.sum(), "predicted " + m.predictedTokens.sum());
        assertEquals(4 * CHUNK, m.predictedTokens.sum());
        assertEquals(0, proxy.metrics.kvDecodeOnly.sum(), "the store lacks the last chunk");
    }
}
