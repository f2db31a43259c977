package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** A client connection with nothing in flight is closed after the idle timeout; one waiting on an answer is not. */
class ClientIdleTimeoutTest extends ProxyTestBase {
    private static final Duration IDLE = Duration.ofMillis(300);
    private static final Pattern LENGTH = Pattern.compile("(?i)content-length: *(\\d+)");

    @Test
    void anIdleKeepAliveConnectionIsClosedAfterTheTimeout() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().clientIdleTimeout(IDLE).decode(d.address()));

        try (Socket client = new Socket(InetAddress.getLoopbackAddress(), proxy.port())) {
            client.setSoTimeout(10_000);
            client.getOutputStream().write("GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            client.getOutputStream().flush();
            InputStream in = client.getInputStream();
            String head = readHead(in);
            assertTrue(head.startsWith("HTTP/1.1 200"), head);
            Matcher m = LENGTH.matcher(head);
            assertTrue(m.find(), head);
            in.readNBytes(Integer.parseInt(m.group(1)));
            long answered = System.nanoTime();

            assertEquals(-1, in.read(), "the proxy closes the idle connection: no more bytes, end of stream");
            long idleMillis = (System.nanoTime() - answered) / 1_000_000;
            assertTrue(idleMillis >= IDLE.toMillis() - 50 && idleMillis < 5_000,
                    "closed after " + idleMillis + " ms of idleness, the timeout is " + IDLE.toMillis() + " ms");
        }
    }

    @Test
    void aConnectionWaitingLongerThanTheTimeoutForItsAnswerIsKept() throws Exception {
        var p = instance("p");
        var d = instance("d").stall(3 * IDLE.toMillis());
        XpydProxy proxy = start(config().clientIdleTimeout(IDLE).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, "/v1/completions",
                "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":4}");

        assertEquals(200, res.statusCode(), res.body());
        assertTrue(res.body().contains("\"choices\""), res.body());
    }

    private static String readHead(InputStream in) throws java.io.IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int matched = 0;
        byte[] end = {'\r', '\n', '\r', '\n'};
        while (matched < end.length) {
            int b = in.read();
            if (b < 0) {
                throw new java.io.EOFException("the proxy closed before the end of the response head: " + head);
            }
            head.write(b);
            matched = b == end[matched] ? matched + 1 : (b == '\r' ? 1 : 0);
        }
        return head.toString(StandardCharsets.US_ASCII);
    }
}
