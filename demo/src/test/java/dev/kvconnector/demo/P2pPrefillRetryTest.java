package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.proxy.PrefillFailureMode;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.proxy.XpydProxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The proxy's concurrent flow over peer-to-peer engines when the first P fails mid-prefill: the proxy retries on a
 * second P and tells D, whose drop-select then takes the KV from the second P (a hit, not a recompute), token for
 * token what a single engine answers, well before D's layer timeout. Three engine servers and the real proxy in this
 * JVM, each engine with its own transfer engine over the test double (loopback TCP).
 */
class P2pPrefillRetryTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(11));
    private static final String MODEL = "m";
    private static final int MAX_TOKENS = 8;
    /** Long, so that a D that waited for the failed P would be seen. */
    private static final long LAYER_TIMEOUT_MS = 20_000;

    private Engine single;
    private Engine failing;
    private Engine producer;
    private Engine consumer;
    private EngineServer failingServer;
    private EngineServer producerServer;
    private EngineServer consumerServer;
    private XpydProxy proxy;
    private HttpClient http;

    @BeforeEach
    void start() throws Exception {
        single = Engine.builder(WEIGHTS).build();
        failing = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, null).p2p(p2p(KVRole.PRODUCER))
                .failPrefillAfterLayers(1).build();
        producer = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, null).p2p(p2p(KVRole.PRODUCER)).build();
        consumer = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, null).p2p(p2p(KVRole.CONSUMER)).build();
        failingServer = EngineServer.start(failing, "127.0.0.1", 0, MODEL);
        producerServer = EngineServer.start(producer, "127.0.0.1", 0, MODEL);
        consumerServer = EngineServer.start(consumer, "127.0.0.1", 0, MODEL);
        // Round robin: the first request's prefill goes to the failing P, its retry to the other.
        proxy = new XpydProxy(ProxyConfig.builder(MODEL).bindHost("127.0.0.1").port(0).flow(ProxyFlow.CONCURRENT)
                .onPrefillFailure(PrefillFailureMode.RETRY).maxPrefillAttempts(2).healthInterval(Duration.ZERO)
                .prefill(address(failingServer), address(producerServer)).decode(address(consumerServer)).build())
                .start();
        http = HttpClient.newHttpClient();
    }

    private static dev.kvconnector.config.KvTransferConfig p2p(KVRole role) {
        return P2pTransport.kvTransferConfig(role, P2pTransportTest.engineUri(), LAYER_TIMEOUT_MS, null, null);
    }

    private static String address(EngineServer s) {
        return "127.0.0.1:" + s.port();
    }

    @AfterEach
    void stop() {
        http.close();
        proxy.close();
        consumerServer.close();
        producerServer.close();
        failingServer.close();
        consumer.close();
        producer.close();
        failing.close();
        single.close();
    }

    @Test
    void aPrefillRetriedOnASecondPReachesDWhichLoadsItFromThatPTokenForTokenWellBeforeItsTimeout()
            throws Exception {
        int[] prompt = ByteTokenizer.encode("the first P fails mid-prefill; the proxy retries on the second one");
        int free = producer.freeBlocks();

        long start = System.nanoTime();
        JsonNode answer = ProxyTestClient.complete(http, proxy, MODEL, MAX_TOKENS, prompt);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertEquals(1, failing.metrics().requests(), "the first P was asked first");
        assertEquals(0, failing.metrics().prefillPasses(), "the first P's prefill failed");
        assertEquals(1, producer.metrics().prefillPasses(), "the second P computed the prompt");
        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), ProxyTestClient.tokenIds(answer));
        EngineMetrics d = consumer.metrics();
        assertEquals(1, d.loadedPrefills(), "D recomputed instead of loading from the second P: " + d.misses());
        assertEquals(0, d.prefillTokens(), "D computed prompt tokens");
        assertEquals(0, d.misses(MissReason.TIMED_OUT));
        assertTrue(ms < LAYER_TIMEOUT_MS / 4, "the answer took " + ms + " ms: D waited for the failed P");
        assertTrue(producer.connector().metrics().insertedBytes() > 0, "the second P wrote nothing into D");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!metrics().contains("xpyd_proxy_prefill_moves_announced_total 1") && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertTrue(metrics().contains("xpyd_proxy_prefill_moves_announced_total 1"), metrics());
        P2pTransportTest.awaitFree(producer, free);
    }

    private String metrics() throws Exception {
        URI u = proxy.uri().resolve("/metrics");
        return http.send(HttpRequest.newBuilder(u).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
    }
}
