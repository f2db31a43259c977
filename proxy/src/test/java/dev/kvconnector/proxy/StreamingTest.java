package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.Socket;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** SSE answers pass through chunk by chunk, and a client that leaves cancels the upstream request. */
class StreamingTest extends ProxyTestBase {

    private static final String STREAMED = "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":8,\"stream\":true}";

    @Test
    void firstChunkReachesTheClientBeforeDecodeFinishes() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        var p = instance("p");
        var d = instance("d").stream(3, 0).gateAfterFirstChunk(gate);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<InputStream> res = openStream(proxy);
        try (var reader = new BufferedReader(new InputStreamReader(res.body(), StandardCharsets.UTF_8))) {
            assertEquals(200, res.statusCode());
            assertTrue(res.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream"));
            // D is parked at its gate after chunk 0, so this line can only come from a chunk flushed early.
            assertEquals(d.chunk(0, false).strip(), reader.readLine());
            assertEquals(0, d.completed.get());
            gate.countDown();
            StringBuilder rest = new StringBuilder();
            for (String line; (line = reader.readLine()) != null; ) {
                rest.append(line).append('\n');
            }
            assertEquals("\n" + d.chunk(1, false) + d.chunk(2, false) + "data: [DONE]\n\n", rest.toString());
        } finally {
            gate.countDown();
        }
    }

    @Test
    void chatStreamBytesPassThroughUnchanged() throws Exception {
        var p = instance("p");
        var d = instance("d").stream(4, 5);
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/chat/completions", "{\"model\":\"test-model\",\"messages\":"
                + "[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}");

        assertEquals(200, res.statusCode());
        assertEquals(d.chunk(0, true) + d.chunk(1, true) + d.chunk(2, true) + d.chunk(3, true) + "data: [DONE]\n\n",
                res.body());
    }

    @Test
    void clientDisconnectCancelsTheDecodeRequest() throws Exception {
        var p = instance("p");
        var d = instance("d").stream(400, 25);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<InputStream> res = openStream(proxy);
        InputStream body = res.body();
        assertTrue(body.read() >= 0);
        body.close();
        http.shutdownNow();

        // 400 chunks take 10 s; the double sees its connection closed long before.
        assertTrue(d.sawDisconnect.await(8, TimeUnit.SECONDS), "decode never saw the proxy close its connection");
        assertEquals(0, d.completed.get());
    }

    @Test
    void clientLeavingWhileDecodeIsSilentCancelsItAtOnce() throws Exception {
        var p = instance("p");
        var d = instance("d").stall(10_000);
        XpydProxy proxy = start(config().firstByteTimeout(Duration.ofSeconds(30)).prefill(p.address())
                .decode(d.address()));
        Instance decode = proxy.pool.list(Role.DECODE).get(0);

        try (Socket client = new Socket(InetAddress.getLoopbackAddress(), proxy.port())) {
            byte[] body = STREAMED.getBytes(StandardCharsets.UTF_8);
            client.getOutputStream().write(("POST /v1/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type:"
                    + " application/json\r\nContent-Length: " + body.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            client.getOutputStream().write(body);
            client.getOutputStream().flush();
            awaitTrue(() -> d.completions().size() == 1, "decode never got the request");
            assertEquals(1, decode.outstanding.get());
        }

        // D stays silent for 10 s; the proxy lets it go as soon as the client's connection closes.
        awaitTrue(() -> decode.outstanding.get() == 0, "the decode request outlived its client");
        assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_client_disconnects_total 1"));
    }

    @Test
    void decodeStreamBrokenMidwayEndsWithAnSseErrorEvent() throws Exception {
        var p = instance("p");
        var d = instance("d").stream(5, 0).breakAfterChunks(2);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions", STREAMED);

        assertEquals(200, res.statusCode());
        assertTrue(res.body().startsWith(d.chunk(0, false) + d.chunk(1, false) + "data: {\"error\":"), res.body());
        assertTrue(res.body().contains("\"type\":\"upstream_error\""), res.body());
        assertTrue(!res.body().contains("[DONE]"), "a broken stream must not look finished");
        assertEquals(1, d.completions().size(), "no second decode once bytes reached the client");
    }

    @Test
    void aClientThatStopsReadingHoldsDecodeBackInsteadOfTheProxyBufferingTheStream() throws Exception {
        int chunks = 8000;
        var p = instance("p");
        // 16 KiB a chunk, 125 MiB in all: more than every socket buffer on the way can hold (tcp_rmem may let one
        // receive buffer grow to 32 MiB).
        var d = instance("d").stream(chunks, 0).padChunks(16 * 1024);
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        HttpResponse<InputStream> res = openStream(proxy);
        try (var reader = new BufferedReader(new InputStreamReader(res.body(), StandardCharsets.UTF_8))) {
            assertEquals(200, res.statusCode());
            int held = writtenOnceStill(d);
            assertTrue(held < chunks / 2, "with the client reading nothing, D could still write " + held + " of "
                    + chunks + " chunks: the proxy kept reading into its own memory");
            int next = 0;
            boolean done = false;
            for (String line; (line = reader.readLine()) != null; ) {
                if (line.startsWith("data: {")) {
                    assertTrue(line.contains("\"text\":\"t" + next + "p"), "chunk " + next + " out of order: "
                            + line.substring(0, 80));
                    next++;
                } else if (line.equals("data: [DONE]")) {
                    done = true;
                }
            }
            assertEquals(chunks, next, "every chunk arrives once the client reads again");
            assertTrue(done);
        }
    }

    /** D's count of written chunks once it has not moved for 500 ms (within 20 s). */
    private static int writtenOnceStill(VllmInstanceTestDouble d) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        int last = -1;
        long stillSince = System.nanoTime();
        while (System.nanoTime() < deadline) {
            int now = d.chunksWritten.get();
            if (now != last) {
                last = now;
                stillSince = System.nanoTime();
            } else if (now > 0 && System.nanoTime() - stillSince > TimeUnit.MILLISECONDS.toNanos(500)) {
                return now;
            }
            Thread.sleep(50);
        }
        return last;
    }

    /** Sends the streamed completion through the proxy and returns once its headers are in; the body is unread. */
    private HttpResponse<InputStream> openStream(XpydProxy proxy) throws Exception {
        return http.send(HttpRequest.newBuilder(uri(proxy, "/v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(STREAMED))
                .build(), HttpResponse.BodyHandlers.ofInputStream());
    }
}
