package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.proxy.PrefillFailureMode;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.proxy.XpydProxy;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The proxy's concurrent flow over engines that move KV through a store, when the only P fails mid-prefill (decode-only
 * mode, no retry): the proxy tells D that the prefill was given up, and D, which was waiting layer-wise for the
 * transfer's objects, recomputes at once, token for token what a single engine answers, instead of waiting out its
 * layer timeout. Two engine servers, one store and the real proxy in this JVM.
 */
class StorePrefillGivenUpTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(11));
    private static final String MODEL = "m";
    private static final int MAX_TOKENS = 8;
    /** Long, so that a D that waited for the failed P would be seen. */
    private static final long LAYER_TIMEOUT_MS = 20_000;

    private KVStore store;
    private KVStoreConnector pConnector;
    private KVStoreConnector dConnector;
    private Engine single;
    private Engine failing;
    private Engine consumer;
    private EngineServer failingServer;
    private EngineServer consumerServer;
    private XpydProxy proxy;
    private HttpClient http;

    @BeforeEach
    void start() throws Exception {
        store = KVStores.open("memory:?capacity=256MiB");
        pConnector = connector();
        dConnector = connector();
        single = Engine.builder(WEIGHTS).build();
        failing = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, pConnector).failPrefillAfterLayers(1).build();
        consumer = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dConnector).layerWise(true).build();
        failingServer = EngineServer.start(failing, "127.0.0.1", 0, MODEL);
        consumerServer = EngineServer.start(consumer, "127.0.0.1", 0, MODEL);
        proxy = new XpydProxy(ProxyConfig.builder(MODEL).bindHost("127.0.0.1").port(0).flow(ProxyFlow.CONCURRENT)
                .onPrefillFailure(PrefillFailureMode.DECODE_ONLY).healthInterval(Duration.ZERO)
                .prefill("127.0.0.1:" + failingServer.port()).decode("127.0.0.1:" + consumerServer.port()).build())
                .start();
        http = HttpClient.newHttpClient();
    }

    private KVStoreConnector connector() {
        ModelConfig c = WEIGHTS.config();
        return KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId()).layerTimeoutMillis(LAYER_TIMEOUT_MS)
                .build();
    }

    @AfterEach
    void stop() {
        http.close();
        proxy.close();
        consumerServer.close();
        failingServer.close();
        consumer.close();
        failing.close();
        single.close();
        dConnector.close();
        pConnector.close();
        store.close();
    }

    @Test
    void aPrefillTheProxyGivesUpEndsDsLayerWiseWaitAndDRecomputesTokenForToken() throws Exception {
        int[] prompt = ByteTokenizer.encode("the only P fails mid-prefill; D must not wait for it");

        long start = System.nanoTime();
        JsonNode answer = ProxyTestClient.complete(http, proxy, MODEL, MAX_TOKENS, prompt);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertEquals(1, failing.metrics().requests(), "the P was asked");
        assertEquals(0, failing.metrics().prefillPasses(), "the P's prefill failed");
        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), ProxyTestClient.tokenIds(answer));
        EngineMetrics d = consumer.metrics();
        assertEquals(1, d.misses(MissReason.ABSENT), "D's load did not end as given up: " + d.misses());
        assertEquals(0, d.misses(MissReason.TIMED_OUT), "D waited out its layer timeout");
        assertTrue(ms < LAYER_TIMEOUT_MS / 4, "the answer took " + ms + " ms: D waited for the failed P");
    }

    @Test
    void aRequestWhoseParamsSayNoPrefillComesIsComputedWithoutWaiting() {
        int[] prompt = ByteTokenizer.encode("no P could be picked for this request");
        KVTransferParams params = KVTransferParams.builder().transferId("t-no-p").doRemotePrefill(true)
                .unknownField(P2pTransport.ABANDONED_FIELD, BooleanNode.TRUE).build();

        long start = System.nanoTime();
        Generation g = consumer.generate(prompt, MAX_TOKENS, params, token -> { });
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertArrayEquals(single.generate(prompt, MAX_TOKENS).tokens(), g.tokens());
        assertEquals(1, consumer.metrics().misses(MissReason.ABSENT), consumer.metrics().misses().toString());
        assertEquals(0, consumer.metrics().misses(MissReason.TIMED_OUT), "D waited for a producer");
        assertTrue(ms < LAYER_TIMEOUT_MS / 4, "the answer took " + ms + " ms: D waited for a producer");
    }
}
