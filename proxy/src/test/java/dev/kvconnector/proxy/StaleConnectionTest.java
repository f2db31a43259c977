package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A keep-alive connection the instance closed while it sat idle in the proxy's pool (vLLM's uvicorn does so
 * after 5 s) is not used again; one that closes without an answer as the request goes out on it (the close and the
 * request crossed) is retried once on the same instance; a new connection that fails before its first response is
 * not, since the instance may have processed that request.
 */
class StaleConnectionTest extends ProxyTestBase {

    private static final String STREAM =
            "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":2,\"stream\":true}";

    @Test
    void connectionTheInstanceClosedWhileIdleIsNotUsedAgain() throws Exception {
        try (var p = new IdleClosingInstanceDouble("p", 30, false, false);
             var d = new IdleClosingInstanceDouble("d", 30, false, false)) {
            // No model check: its connection would count among the idle ones closed.
            XpydProxy proxy = start(config().startupCheck(StartupCheck.OFF).prefill(p.address()).decode(d.address()));

            HttpResponse<String> first = post(proxy, "/v1/completions", STREAM);
            assertEquals(200, first.statusCode(), first.body());
            // Both doubles close their idle connection after 30 ms; the proxy's pool still holds them.
            awaitClosedIdle(p, 1);
            awaitClosedIdle(d, 1);

            HttpResponse<String> second = post(proxy, "/v1/completions", STREAM);

            assertEquals(200, second.statusCode(), second.body());
            assertTrue(second.body().endsWith("data: [DONE]\n\n"), second.body());
            // Each instance got and answered each request exactly once, the second on a new connection: the proxy
            // saw the idle connection close and dropped it.
            assertEquals(2, p.received.size());
            assertEquals(2, p.answered.get());
            assertEquals(2, d.received.size());
            assertEquals(2, d.answered.get());
            assertEquals(2, d.connections.get());
            assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_stale_connection_retries_total 0"));
        }
    }

    @Test
    void requestOnAKeptAliveConnectionClosedWithoutAnAnswerIsSentAgainToTheSameInstance() throws Exception {
        var p = instance("p");
        try (var d = new IdleClosingInstanceDouble("d", 30_000, false, true)) {
            XpydProxy proxy = start(config().startupCheck(StartupCheck.OFF).prefill(p.address()).decode(d.address()));

            assertEquals(200, post(proxy, "/v1/completions", STREAM).statusCode());
            HttpResponse<String> second = post(proxy, "/v1/completions", STREAM);

            assertEquals(200, second.statusCode(), second.body());
            assertTrue(second.body().endsWith("data: [DONE]\n\n"), second.body());
            // The second request reached the kept-alive connection, which closed unanswered; it went again on a new one.
            assertEquals(3, d.received.size());
            assertEquals(2, d.answered.get());
            assertEquals(2, d.connections.get());
            assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_stale_connection_retries_total 1"));
        }
    }

    @Test
    void freshConnectionClosedWithoutAnAnswerIsNotRetriedOnTheSameInstance() throws Exception {
        var p = instance("p");
        try (var d = new IdleClosingInstanceDouble("d", 30_000, true, false)) {
            XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

            HttpResponse<String> res = post(proxy, "/v1/completions", STREAM);

            assertEquals(502, res.statusCode(), res.body());
            JsonNode err = json(res.body()).get("error");
            assertTrue(err.get("message").asText().contains(d.address()), err.toString());
            // The instance got the request once: it may have processed it, so it is not sent again.
            assertEquals(1, d.received.size());
            assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_stale_connection_retries_total 0"));
        }
    }

    private static void awaitClosedIdle(IdleClosingInstanceDouble i, int n) throws InterruptedException {
        long end = System.nanoTime() + 5_000_000_000L;
        while (i.closedIdle.get() < n) {
            if (System.nanoTime() > end) {
                throw new AssertionError(i.name + " closed " + i.closedIdle.get() + " idle connections, expected " + n);
            }
            Thread.sleep(5);
        }
    }

    /**
     * Test double of an OpenAI-compatible instance on raw sockets: it keeps connections alive but closes one
     * that stays idle for {@code idleMillis}, as uvicorn does (after 5 s). With {@code dropRequests} it reads
     * each request and closes the connection without answering, as an instance that crashes would; with
     * {@code dropReused} it does so with every request after a connection's first, as when the instance closes an
     * idle connection at the moment the proxy sends on it.
     */
    private static final class IdleClosingInstanceDouble implements AutoCloseable {
        final String name;
        final List<String> received = new CopyOnWriteArrayList<>();
        final AtomicInteger answered = new AtomicInteger();
        final AtomicInteger connections = new AtomicInteger();
        final AtomicInteger closedIdle = new AtomicInteger();
        private final int idleMillis;
        private final boolean dropRequests;
        private final boolean dropReused;
        private final ServerSocket server;
        private final List<Socket> open = new CopyOnWriteArrayList<>();

        IdleClosingInstanceDouble(String name, int idleMillis, boolean dropRequests, boolean dropReused)
                throws IOException {
            this.name = name;
            this.idleMillis = idleMillis;
            this.dropRequests = dropRequests;
            this.dropReused = dropReused;
            server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread.ofVirtual().name("idle-closing-" + name).start(this::acceptLoop);
        }

        String address() {
            return "127.0.0.1:" + server.getLocalPort();
        }

        private void acceptLoop() {
            while (!server.isClosed()) {
                try {
                    Socket s = server.accept();
                    connections.incrementAndGet();
                    open.add(s);
                    Thread.ofVirtual().start(() -> serve(s));
                } catch (IOException e) {
                    return;
                }
            }
        }

        private void serve(Socket s) {
            try (s) {
                s.setTcpNoDelay(true);
                InputStream in = new BufferedInputStream(s.getInputStream());
                OutputStream out = s.getOutputStream();
                boolean firstRequest = true;
                while (true) {
                    // The first request comes at once; later ones must come before the idle limit.
                    s.setSoTimeout(firstRequest ? 10_000 : idleMillis);
                    String requestLine;
                    try {
                        requestLine = line(in);
                    } catch (SocketTimeoutException idle) {
                        closedIdle.incrementAndGet();
                        return;
                    }
                    if (requestLine == null) {
                        return;
                    }
                    boolean reused = !firstRequest;
                    firstRequest = false;
                    s.setSoTimeout(10_000);
                    int length = 0;
                    for (String h = line(in); h != null && !h.isEmpty(); h = line(in)) {
                        if (h.regionMatches(true, 0, "Content-Length:", 0, 15)) {
                            length = Integer.parseInt(h.substring(15).trim());
                        }
                    }
                    String body = new String(in.readNBytes(length), StandardCharsets.UTF_8);
                    if (!requestLine.startsWith("POST /v1/")) {
                        answerModels(out);
                        continue;
                    }
                    received.add(body);
                    if (dropRequests || (dropReused && reused)) {
                        return;
                    }
                    answer(out, body.contains("\"stream\":true"));
                    answered.incrementAndGet();
                }
            } catch (IOException e) {
                // The proxy went away; nothing to answer.
            }
        }

        private static void answerModels(OutputStream out) throws IOException {
            byte[] json = ("{\"object\":\"list\",\"data\":[{\"id\":\"" + MODEL + "\",\"object\":\"model\"}]}")
                    .getBytes(StandardCharsets.UTF_8);
            out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + json.length
                    + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(json);
            out.flush();
        }

        private void answer(OutputStream out, boolean stream) throws IOException {
            if (!stream) {
                byte[] json = ("{\"id\":\"cmpl-" + name + "\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                        + "\"text\":\"x\",\"finish_reason\":\"length\"}]}").getBytes(StandardCharsets.UTF_8);
                out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + json.length
                        + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(json);
                out.flush();
                return;
            }
            StringBuilder sb = new StringBuilder("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n");
            List<String> events = List.of("data: {\"choices\":[{\"index\":0,\"text\":\"t0\"}]}\n\n",
                    "data: [DONE]\n\n");
            for (String event : events) {
                sb.append(Integer.toHexString(event.length())).append("\r\n").append(event).append("\r\n");
            }
            sb.append("0\r\n\r\n");
            out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
        }

        private static String line(InputStream in) throws IOException {
            StringBuilder sb = new StringBuilder();
            int b;
            while ((b = in.read()) >= 0) {
                if (b == '\n') {
                    int n = sb.length();
                    return n > 0 && sb.charAt(n - 1) == '\r' ? sb.substring(0, n - 1) : sb.toString();
                }
                sb.append((char) b);
            }
            return sb.isEmpty() ? null : sb.toString();
        }

        @Override
        public void close() throws IOException {
            server.close();
            for (Socket s : open) {
                s.close();
            }
        }
    }
}
