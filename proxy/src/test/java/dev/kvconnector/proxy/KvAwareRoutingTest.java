package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.MalformedEventException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The kv-aware policy on scripted event streams: cache hits, load, decode-only from the store, bad events. */
class KvAwareRoutingTest extends ProxyTestBase {
    private static final int CHUNK = 16;
    private static final byte[] ROOT = HexFormat.of().parseHex("5e".repeat(32));
    private static final String STORE = "valkey://store:6379";
    private static final String PROMPT = "The quick brown fox jumps over the lazy dog, then naps for a while.";

    private static List<String> hashes(String prompt) {
        return KvPrompts.chunkHashes(ROOT, CHUNK, prompt);
    }

    /** A scripted publisher: numbers its batches itself. */
    private static final class Script {
        final KvEventFeed feed;
        final long epoch;
        long seq;

        Script(KvEventFeed feed, long epoch) {
            this.feed = feed;
            this.epoch = epoch;
        }

        void send(List<KvEvent> events) {
            feed.accept(new KvEventBatch(new KvEventSource(feed.instance, epoch, null, null, CHUNK,
                    HexFormat.of().formatHex(ROOT)), seq++, System.currentTimeMillis() / 1000.0, events));
        }

        void store(List<String> hashes, int count, String medium) {
            List<KvEvent> events = new ArrayList<>();
            for (int c = 0; c < count; c++) {
                events.add(new KvEvent.Stored(epoch, seq, feed.instance, medium, null, hashes.get(c),
                        c == 0 ? null : hashes.get(c - 1), CHUNK, -1));
            }
            send(events);
        }
    }

    private static String completion(String prompt) {
        return "{\"prompt\":" + JSON.valueToTree(prompt) + ",\"max_tokens\":4}";
    }

    @Test
    void prefillGoesToThePrefillInstanceHoldingTheLongestPrefixAndOtherwiseByLoad() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p1.address(), p2.address())
                .decode(d.address()));
        Script s1 = new Script(proxy.kvRouter().feed(p1.address(), null), 1);
        Script s2 = new Script(proxy.kvRouter().feed(p2.address(), null), 7);
        List<String> h = hashes(PROMPT);
        s1.store(h, 1, "GPU");
        s2.store(h, 3, "GPU");
        for (int k = 0; k < 3; k++) {
            assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
        }
        assertEquals(0, p1.completions().size());
        assertEquals(3, p2.completions().size());
        assertEquals(3, proxy.kvRouter().metrics.decisions(KvMetrics.Reason.CACHE_HIT));

        // A prompt nobody holds: by load (and round robin among equals).
        for (int k = 0; k < 2; k++) {
            assertEquals(200, post(proxy, "/v1/completions", completion("unrelated prompt " + k)).statusCode());
        }
        assertEquals(2, proxy.kvRouter().metrics.decisions(KvMetrics.Reason.LOAD));
        assertEquals(1, p1.completions().size());

        // p2 evicts its copy: the index follows and the prefix is p1's again.
        s2.send(List.of(new KvEvent.Removed(7, 0, p2.address(), "GPU", h.get(0),
                dev.kvconnector.events.RemovalReason.EVICTED)));
        assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
        assertEquals(2, p1.completions().size());
    }

    @Test
    void aPromptTheStoreHoldsWholeGoesStraightToDecodeAndAStaleEntryIsJustAMiss() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.V1).prefill(p.address())
                .decode(d.address()));
        Script sp = new Script(proxy.kvRouter().feed(p.address(), null), 3);
        List<String> h = hashes(PROMPT);
        sp.store(h, h.size(), STORE);

        // The test double holds no KV at all: every store entry is stale, D recomputes, the request succeeds.
        var r = post(proxy, "/v1/completions", completion(PROMPT));
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(0, p.completions().size(), "prefill ran although the store held the prompt");
        assertEquals(1, d.completions().size());
        assertFalse(d.completions().get(0).body().has("kv_transfer_params"));
        assertEquals(1, proxy.metrics.kvDecodeOnly.sum());
        assertEquals(1, proxy.kvRouter().metrics.decisions(KvMetrics.Reason.STORE_HIT));

        // D's miss comes back as an event (a load failure, a removal on the wire): the next request prefills.
        sp.send(List.of(new KvEvent.Removed(3, 0, p.address(), STORE, h.get(0),
                dev.kvconnector.events.RemovalReason.REMOVED)));
        assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
        assertEquals(1, p.completions().size());

        String metrics = get(proxy, "/metrics").body();
        assertTrue(metrics.contains("xpyd_proxy_kv_decode_only_total 1"), metrics);
        assertTrue(metrics.contains("xpyd_kv_route_decisions_total{reason=\"store_hit\"} 1"), metrics);
        assertTrue(metrics.contains("xpyd_kv_index_chunks "), metrics);
        assertTrue(metrics.contains("xpyd_kv_event_lag_ms "), metrics);
    }

    @Test
    void aPromptTheStoreHoldsButForAShortSuffixGoesToDecodeAloneAndALongerSuffixPrefills() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.V1).prefill(p.address())
                .decode(d.address()));
        Script sp = new Script(proxy.kvRouter().feed(p.address(), null), 3);
        KvMetrics m = proxy.kvRouter().metrics;
        // PROMPT is 67 tokens: the store holds its four full chunks, as a decode engine that saved the previous turn
        // leaves them. The next turn adds 22 tokens: 25 after the stored prefix, at most the default 64.
        String nextTurn = PROMPT + " And then it wakes up.";
        sp.store(hashes(nextTurn), 4, STORE);
        d.loadedTokens(4 * CHUNK);
        var r = post(proxy, "/v1/completions", completion(nextTurn));
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(0, p.completions().size(), "prefill ran although only 25 tokens follow the store's prefix");
        assertEquals(1, d.completions().size());
        assertFalse(d.completions().get(0).body().has("kv_transfer_params"), "D loads from the store, not from a P");
        assertEquals(1, m.decisions(KvMetrics.Reason.STORE_PREFIX));
        assertEquals(0, m.decisions(KvMetrics.Reason.STORE_HIT));
        assertEquals(1, proxy.metrics.kvDecodeOnly.sum());
        // D is predicted the store's prefix, and reports loading exactly that.
        assertEquals(1, m.exact.sum());
        assertEquals(4 * CHUNK, m.predictedTokens.sum());

        // 65 tokens after the same prefix: more than 64, so P prefills (nothing in its own cache: by load).
        String longTurn = PROMPT + " " + "x".repeat(64);
        assertEquals(132, KvPrompts.byteTokens(longTurn).length);
        sp.store(hashes(longTurn), 4, STORE);
        assertEquals(200, post(proxy, "/v1/completions", completion(longTurn)).statusCode());
        assertEquals(1, p.completions().size());
        assertEquals(1, m.decisions(KvMetrics.Reason.LOAD));

        // A prompt short enough but with nothing in the store: D would load nothing, so P prefills it.
        assertEquals(200, post(proxy, "/v1/completions", completion("a short prompt")).statusCode());
        assertEquals(2, p.completions().size());
        assertEquals(2, m.decisions(KvMetrics.Reason.LOAD));

        String metrics = get(proxy, "/metrics").body();
        assertTrue(metrics.contains("xpyd_kv_route_decisions_total{reason=\"store_prefix\"} 1"), metrics);
        assertTrue(metrics.contains("xpyd_proxy_kv_decode_only_total 1"), metrics);
    }

    @Test
    void withNoSuffixAllowedOnlyAWholePromptInTheStoreSkipsThePrefill() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).flow(ProxyFlow.V1).prefill(p.address())
                .decode(d.address()).kvDecodeMaxSuffix(0));
        Script sp = new Script(proxy.kvRouter().feed(p.address(), null), 3);
        KvMetrics m = proxy.kvRouter().metrics;
        // 64 tokens, four whole chunks; the next turn adds one token, which the store lacks.
        String whole = "0123456789abcdef".repeat(4);
        sp.store(hashes(whole), 4, STORE);
        assertEquals(200, post(proxy, "/v1/completions", completion(whole + "?")).statusCode());
        assertEquals(1, p.completions().size(), "a one-token suffix prefills when --kv-decode-max-suffix is 0");
        assertEquals(0, m.decisions(KvMetrics.Reason.STORE_PREFIX));
        assertEquals(200, post(proxy, "/v1/completions", completion(whole)).statusCode());
        assertEquals(1, p.completions().size());
        assertEquals(1, m.decisions(KvMetrics.Reason.STORE_HIT));
        assertEquals(1, proxy.metrics.kvDecodeOnly.sum());
    }

    @Test
    void chatsAndPromptsBeforeAnyEventGoByLoadWithTheirReason() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p.address()).decode(d.address()));
        assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
        assertEquals(1, proxy.kvRouter().metrics.decisions(KvMetrics.Reason.NO_INDEX));
        assertEquals(200, post(proxy, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").statusCode());
        assertEquals(1, proxy.kvRouter().metrics.decisions(KvMetrics.Reason.NO_TOKENS));
        assertEquals(2, p.completions().size());
    }

    @Test
    void malformedDuplicatedAndOutOfOrderEventsAreCountedAndTheProxyKeepsRouting() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d = instance("d");
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p1.address(), p2.address())
                .decode(d.address()));
        KvEventFeed feed = proxy.kvRouter().feed(p2.address(), null);
        Script s = new Script(feed, 1);
        List<String> h = hashes(PROMPT);
        s.store(h, 2, "GPU");
        s.seq = 0;
        s.store(h, 2, "GPU"); // the same sequence again
        feed.malformed(new MalformedEventException("truncated"));
        s.seq = 5;
        s.store(h, 1, "GPU"); // a gap, no replay: rebuilt from here
        s.seq = 3;
        s.store(h, 2, "GPU"); // older than what was applied
        KvMetrics m = proxy.kvRouter().metrics;
        assertEquals(1, m.duplicates.sum());
        assertEquals(1, m.malformed.sum());
        assertEquals(1, m.outOfOrder.sum());
        assertEquals(1, m.gaps.sum());
        assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
        assertEquals(1, p2.completions().size());
        String metrics = get(proxy, "/metrics").body();
        assertTrue(metrics.contains("xpyd_kv_events_ignored_total{why=\"malformed\"} 1"), metrics);
        assertTrue(metrics.contains("xpyd_kv_event_gaps_total 1"), metrics);
    }
}
