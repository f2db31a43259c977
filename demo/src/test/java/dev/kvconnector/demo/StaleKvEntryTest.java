package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.proxy.KvEventEndpoint;
import dev.kvconnector.proxy.Policy;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.proxy.XpydProxy;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * A stale index entry degrades to a normal miss, never a failed request: real engines (P with a prefix cache, D)
 * publish their KV events to a kv-aware proxy; the prompt's objects then leave the store behind the index's back,
 * as an eviction that no event reports (a redis-server without keyspace notifications, so neither the engines nor
 * the proxy can learn of it). The proxy still believes the store holds the whole prompt and sends it to D
 * alone; D misses with its reason ({@code ABSENT}), recomputes, and answers token for token what a single engine
 * answers; the proxy counts the prediction over, and D's load-failure event corrects the index, so the next request
 * with that prompt goes to P again.
 */
class StaleKvEntryTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int CHUNK = 16;
    private static final int MAX_TOKENS = 6;

    private static EngineCommand.Running engine(String role, String store, String... extra) {
        List<String> args = new ArrayList<>(List.of("--port", "0", "--tiny", "--role", role, "--store", store,
                "--share-prefixes", "--chunk-tokens", Integer.toString(CHUNK), "--kv-events", "tcp://127.0.0.1:0",
                "--kv-events-replay", "tcp://127.0.0.1:0"));
        args.addAll(List.of(extra));
        EngineCommand cmd = new EngineCommand();
        new CommandLine(cmd).parseArgs(args.toArray(String[]::new));
        return cmd.start();
    }

    private static String instance(EngineCommand.Running r) {
        return "127.0.0.1:" + r.server().port();
    }

    private static KvEventEndpoint events(EngineCommand.Running r) {
        return new KvEventEndpoint(instance(r), r.events().publishEndpoint(), r.events().replayEndpoint());
    }

    @Test
    void aDecodeOnlyRequestWhoseKvWasEvictedIsAMissThatRecomputesTheSameTokens() throws Exception {
        int[] prompt = ByteTokenizer.encode("Context: the store evicted this prompt, and no event said so. Q: and?");
        try (RedisServerProcess redis = RedisServerProcess.start("--notify-keyspace-events", "");
             EngineCommand.Running p = engine("kv_producer", "valkey://" + redis.hostPort(), "--prefix-cache");
             EngineCommand.Running d = engine("kv_consumer", "valkey://" + redis.hostPort());
             Engine single = Engine.builder(ModelWeights.random(ModelConfig.tiny(0))).build();
             XpydProxy proxy = new XpydProxy(ProxyConfig.builder("kvc-demo").bindHost("127.0.0.1").port(0)
                     .flow(ProxyFlow.V1).policy(Policy.KV_AWARE).prefill(instance(p)).decode(instance(d))
                     .kvEvents(events(p)).kvEvents(events(d)).build()).start();
             KVStore behindTheBack = KVStores.open("valkey://" + redis.hostPort());
             HttpClient http = HttpClient.newHttpClient()) {
            List<Integer> want = new ArrayList<>();
            for (int t : single.generate(prompt, MAX_TOKENS).tokens()) {
                want.add(t);
            }
            int chunks = (prompt.length + CHUNK - 1) / CHUNK;
            assertEquals(want, complete(http, proxy.uri(), prompt));
            awaitTrue(() -> metric(http, proxy.uri(), "xpyd_kv_index_store_chunks") >= chunks,
                    "the proxy never learned that the store holds the prompt");

            List<ChunkKeys> planned = KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(
                    d.connector().keyContext(), null), CHUNK, ModelConfig.tiny(0).layers(), RequestTokens.of(prompt))
                    .chunks();
            for (ChunkKeys c : planned) {
                assertTrue(behindTheBack.remove(c.manifestKey()), c.manifestKey());
                for (String k : c.layerKeys()) {
                    behindTheBack.remove(k);
                }
            }

            assertEquals(want, complete(http, proxy.uri(), prompt), "the stale entry cost the answer");
            assertEquals(1, metric(http, proxy.uri(), "xpyd_proxy_kv_decode_only_total"));
            assertEquals(1, metric(http, proxy.uri(), "xpyd_kv_predictions_total{outcome=\"over\"}"));
            assertEquals(1, d.engine().metrics().misses(MissReason.ABSENT), "D's miss, counted by its reason");
            // The first time D computed the last prompt token only (no hidden states); this time the whole prompt.
            assertEquals(1 + prompt.length, d.engine().metrics().prefillTokens(), "D recomputed the whole prompt");

            // D's load-failure event took the prompt's first chunk out of the store's entries: P prefills again.
            awaitTrue(() -> metric(http, proxy.uri(), "xpyd_kv_index_store_chunks") < chunks,
                    "the load failure never reached the index");
            assertEquals(want, complete(http, proxy.uri(), prompt));
            assertEquals(1, metric(http, proxy.uri(), "xpyd_proxy_kv_decode_only_total"));
            assertEquals(1, metric(http, proxy.uri(), "xpyd_kv_route_decisions_total{reason=\"cache_hit\"}"),
                    "P's own cache still held the prompt's chunks");
            assertEquals(1, d.engine().metrics().misses(MissReason.ABSENT));
            assertEquals(2, d.engine().metrics().loadedPrefills(), "D loaded the first and the third from the store");
        }
    }

    private static List<Integer> complete(HttpClient http, URI proxy, int[] prompt) throws Exception {
        ObjectNode body = JSON.createObjectNode().put("model", "kvc-demo").put("max_tokens", MAX_TOKENS)
                .put("stream", false);
        var ids = body.putArray("prompt");
        for (int t : prompt) {
            ids.add(t);
        }
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(proxy.resolve("/v1/completions"))
                .header("Content-Type", "application/json").timeout(Duration.ofSeconds(60))
                .POST(HttpRequest.BodyPublishers.ofString(body.toString())).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        List<Integer> out = new ArrayList<>();
        for (JsonNode t : JSON.readTree(r.body()).path("choices").path(0).path("token_ids")) {
            out.add(t.asInt());
        }
        return out;
    }

    private static long metric(HttpClient http, URI proxy, String series) {
        try {
            String text = http.send(HttpRequest.newBuilder(proxy.resolve("/metrics")).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            for (String line : text.split("\n")) {
                if (line.startsWith(series + " ")) {
                    return Long.parseLong(line.substring(series.length() + 1).trim());
                }
            }
            throw new AssertionError(series + " is not in the proxy's /metrics");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    private static void awaitTrue(BooleanSupplier condition, String failure) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(failure + " within 20 s");
            }
            Thread.sleep(20);
        }
    }
}
