package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.InputStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Content-type matching, bounded body reads and the error body shape. */
class HttpIoTest {

    @Test
    void jsonContentTypeMatchesWithParametersAndAnyCase() {
        assertTrue(HttpIo.isJson("application/json"));
        assertTrue(HttpIo.isJson("Application/JSON; charset=utf-8"));
        assertFalse(HttpIo.isJson(null));
        assertFalse(HttpIo.isJson("application/jsonl"));
        assertFalse(HttpIo.isJson("text/plain; note=application/json"));
        assertFalse(HttpIo.isJson("application/x-www-form-urlencoded"));
    }

    @Test
    void readLimitedReturnsTheBodyUpToTheLimitAndNullBeyondIt() throws Exception {
        byte[] body = new byte[20_000];
        body[19_999] = 7;
        assertArrayEquals(body, HttpIo.readLimited(new ByteArrayInputStream(body), 20_000));
        assertNull(HttpIo.readLimited(new ByteArrayInputStream(body), 19_999));
        assertEquals(0, HttpIo.readLimited(new ByteArrayInputStream(new byte[0]), 10).length);
    }

    @Test
    void readLimitedStopsReadingAnEndlessBody() throws Exception {
        InputStream endless = new InputStream() {
            @Override
            public int read() {
                return 'x';
            }

            @Override
            public int read(byte[] b, int off, int len) {
                java.util.Arrays.fill(b, off, off + len, (byte) 'x');
                return len;
            }
        };
        assertNull(HttpIo.readLimited(endless, 1 << 20));
    }

    @Test
    void errorBodyHasTheOpenAiShape() throws Exception {
        var node = ProxyTestBase.JSON.readTree(HttpIo.errorBody("bad \"thing\"", "invalid_request_error", 400));
        assertEquals("bad \"thing\"", node.at("/error/message").asText());
        assertEquals("invalid_request_error", node.at("/error/type").asText());
        assertEquals(400, node.at("/error/code").asInt());
        assertEquals(1, node.size());
    }
}
