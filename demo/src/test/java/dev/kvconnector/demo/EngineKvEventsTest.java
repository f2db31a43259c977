package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.ZmqKvEventSubscriber;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** A demo producer started with --kv-events publishes a stored event per chunk of each prompt it prefills. */
class EngineKvEventsTest {
    @Test
    void aProducersPrefillIsPublishedAsStoredEventsWithTheHashRootInTheTopic() throws Exception {
        EngineCommand cmd = new EngineCommand();
        new CommandLine(cmd).parseArgs("--port", "0", "--tiny", "--role", "kv_producer", "--store",
                "memory:?capacity=16MiB", "--kv-events", "tcp://127.0.0.1:0", "--kv-events-replay",
                "tcp://127.0.0.1:0");
        try (EngineCommand.Running r = cmd.start();
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("engine", r.events().publishEndpoint(),
                     r.events().replayEndpoint(), "");
             HttpClient http = HttpClient.newHttpClient()) {
            String prompt = "x".repeat(500);
            HttpResponse<String> answer = http.send(HttpRequest.newBuilder(r.server().baseUri()
                    .resolve("/v1/completions")).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"kvc-demo\",\"prompt\":\"" + prompt
                            + "\",\"max_tokens\":1}")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            // The SUB socket may have joined after the events went out; the replay from 0 has every message.
            List<KvEvent> events = new ArrayList<>();
            List<KvEventBatch> all = sub.replay(0, 3_000);
            all.forEach(b -> events.addAll(b.events()));
            // Live, at least a heartbeat comes each second; a new SUB socket if the first never connects (jeromq).
            KvEventBatch live = null;
            for (int attempt = 0; attempt < 3 && live == null; attempt++) {
                live = sub.receive(2_000);
                if (live == null) {
                    sub.reconnect();
                }
            }
            assertNotNull(live, "no message, not even a heartbeat");
            assertNotNull(live.source().rootHash());
            assertEquals(256, live.source().chunkTokens());
            assertTrue(events.size() >= 1, events.toString());
            KvEvent.Stored first = assertInstanceOf(KvEvent.Stored.class, events.get(0));
            assertEquals(256, first.tokens());
            assertTrue(first.storeUri().startsWith("memory:"), first.storeUri());
        }
    }
}
