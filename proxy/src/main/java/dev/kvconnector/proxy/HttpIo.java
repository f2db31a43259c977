package dev.kvconnector.proxy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.util.JsonRecyclerPools;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Small helpers to read client requests and write JSON answers and OpenAI-style errors. */
final class HttpIo {
    /**
     * Jackson's default buffer pool is per thread, and every request runs on a new virtual thread, so each parse
     * allocated fresh buffers (JFR: {@code BufferRecycler} among the proxy's hottest methods); a shared pool
     * reuses them.
     */
    static final ObjectMapper JSON = new ObjectMapper(JsonFactory.builder()
            .recyclerPool(JsonRecyclerPools.sharedConcurrentDequePool()).build());

    private HttpIo() {
    }

    /** True for {@code application/json}, with or without parameters such as {@code charset}. */
    static boolean isJson(String contentType) {
        if (contentType == null) {
            return false;
        }
        int semi = contentType.indexOf(';');
        String mime = (semi < 0 ? contentType : contentType.substring(0, semi)).strip();
        return mime.equalsIgnoreCase("application/json");
    }

    /**
     * Reads the request body; returns null when it exceeds {@code maxBytes} (the rest is left unread and
     * the connection is closed after the answer).
     */
    static byte[] readLimited(InputStream in, long maxBytes) throws IOException {
        int limit = (int) Math.min(maxBytes, Integer.MAX_VALUE - 16);
        // Completion bodies are mostly small; the array doubles for long prompts.
        byte[] buf = new byte[Math.min(limit + 1, 2048)];
        int n = 0;
        while (true) {
            if (n == buf.length) {
                if (n > limit) {
                    return null;
                }
                buf = Arrays.copyOf(buf, (int) Math.min((long) limit + 1, (long) n * 2));
            }
            int r = in.read(buf, n, buf.length - n);
            if (r < 0) {
                return n == buf.length ? buf : Arrays.copyOf(buf, n);
            }
            n += r;
            if (n > limit) {
                return null;
            }
        }
    }

    /** Builds {@code {"error":{"message","type","code"}}}, the shape OpenAI clients and vLLM use. */
    static byte[] errorBody(String message, String type, int code) {
        ObjectNode root = JSON.createObjectNode();
        ObjectNode err = root.putObject("error");
        err.put("message", message);
        err.put("type", type);
        err.put("code", code);
        try {
            return JSON.writeValueAsBytes(root);
        } catch (IOException e) {
            throw new IllegalStateException("cannot serialise an error body", e);
        }
    }

    static void sendError(HttpExchange ex, int status, String type, String message) throws IOException {
        send(ex, status, "application/json", errorBody(message, type, status));
    }

    static void sendJson(HttpExchange ex, int status, Object value) throws IOException {
        send(ex, status, "application/json", JSON.writeValueAsBytes(value));
    }

    static void send(HttpExchange ex, int status, String contentType, byte[] body) throws IOException {
        if (contentType != null) {
            ex.getResponseHeaders().set("Content-Type", contentType);
        }
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        if (body.length > 0) {
            try (OutputStream out = ex.getResponseBody()) {
                out.write(body);
            }
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
