package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.events.ZmqKvEventPublisher;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import org.junit.jupiter.api.Test;

/**
 * The whole loop over real sockets: a connector commits an insert, its publisher sends the events, the proxy's
 * subscriber indexes them, and the next request with that prompt is prefilled where the KV is. Then the engine
 * restarts (a new epoch on the same endpoint) and the proxy forgets what the old one held.
 */
class KvEventsEndToEndTest extends ProxyTestBase {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final String PROMPT = "a shared system prompt that many requests start with, and then a question";

    /** What an engine does after a prefill: puts the prompt's KV through its connector, which emits the events. */
    private static void insert(KVStore store, ZmqKvEventPublisher pub, String instance, String prompt) {
        RequestTokens tokens = RequestTokens.of(KvPrompts.byteTokens(prompt));
        int blocks = (tokens.totalTokens() + 15) / 16;
        int[] ids = new int[blocks];
        for (int i = 0; i < blocks; i++) {
            ids[i] = i;
        }
        try (PagedKVCache cache = PagedKVCache.allocate(LAYOUT, blocks);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16).modelId(MODEL)
                     .events(pub).instanceId(instance).build();
             InsertSession s = kv.beginInsert(tokens)) {
            s.putLayers(LayerSource.paged(cache, new BlockTable(ids, 16, tokens.totalTokens())));
            s.commit();
        }
    }

    private static String completion(String prompt) {
        return "{\"prompt\":" + JSON.valueToTree(prompt) + ",\"max_tokens\":2}";
    }

    @Test
    void aLinkSilentForThreeHeartbeatsIsReconnectedAndPicksUpAPublisherThatCameLate() throws Exception {
        var p = instance("p");
        var d = instance("d");
        int port;
        try (java.net.ServerSocket free = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = free.getLocalPort();
        }
        String endpoint = "tcp://127.0.0.1:" + port;
        XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p.address()).decode(d.address())
                .kvEvents(new KvEventEndpoint(p.address(), endpoint, null)));
        KvRouter router = proxy.kvRouter();
        awaitTrue(() -> router.metrics.reconnects.sum() >= 1, "the silent link is reconnected");
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             ZmqKvEventPublisher late = ZmqKvEventPublisher.bind(endpoint, null)) {
            awaitTrue(() -> {
                insert(store, late, p.address(), PROMPT);
                return router.index.size() == 5;
            }, "the late publisher's chunks are indexed");
        }
        assertTrue(get(proxy, "/metrics").body().contains("xpyd_kv_event_reconnects_total "));
    }

    @Test
    void aBadEventEndpointFailsTheStartNamingItAndLeavesNothingRunning() throws Exception {
        var d = instance("d");
        XpydProxy proxy = new XpydProxy(config().policy(Policy.KV_AWARE).decode(d.address())
                .kvEvents(new KvEventEndpoint(d.address(), "tcp://no-port-here", null)).build());
        try {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    proxy::start);
            assertTrue(e.getMessage().contains("tcp://no-port-here") && e.getMessage().contains(d.address()),
                    e.getMessage());
        } finally {
            proxy.stop();
        }
    }

    @Test
    void anInsertsEventsReachTheProxyAndARestartedEngineIsResynchronised() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d = instance("d");
        ZmqKvEventPublisher first = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0");
        String pubEndpoint = first.publishEndpoint();
        String replayEndpoint = first.replayEndpoint();
        try (KVStore store = KVStores.open("memory:?capacity=64MiB")) {
            XpydProxy proxy;
            try (first) {
                proxy = start(config().policy(Policy.KV_AWARE).prefill(p1.address(), p2.address())
                        .decode(d.address()).kvEvents(new KvEventEndpoint(p2.address(), pubEndpoint, replayEndpoint)));
                KvRouter router = proxy.kvRouter();
                // The SUB socket joins asynchronously: the first insert's events may be sent before it has; the
                // replay on the first message it does see brings them back.
                insert(store, first, p2.address(), PROMPT);
                awaitTrue(() -> router.index.size() >= 5, "the first insert's chunks are indexed");
                for (int k = 0; k < 2; k++) {
                    assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
                }
                assertEquals(2, p2.completions().size(), "prefill did not go where the prompt's KV is");
                assertEquals(0, p1.completions().size());
                assertEquals(2, router.metrics.decisions(KvMetrics.Reason.CACHE_HIT));
            }

            // The engine restarts on the same endpoints, with nothing of the old cache: a new epoch.
            KvRouter router = proxy.kvRouter();
            long before = router.metrics.epochChanges.sum();
            try (ZmqKvEventPublisher second = ZmqKvEventPublisher.bind(pubEndpoint, replayEndpoint)) {
                String other = "an unrelated prompt, which the restarted engine computes and stores for later";
                awaitTrue(() -> {
                    insert(store, second, p2.address(), other);
                    return router.metrics.epochChanges.sum() > before;
                }, "the proxy sees the new epoch");
                awaitTrue(() -> router.index.size() == 5, "only the new engine's chunks are indexed");
                assertEquals(200, post(proxy, "/v1/completions", completion(PROMPT)).statusCode());
                assertEquals(1, p1.completions().size() + p2.completions().size() - 2);
                assertEquals(1, router.metrics.decisions(KvMetrics.Reason.LOAD));
                assertTrue(router.metrics.resyncs.sum() >= 2);
            }
        }
    }
}
