package dev.kvconnector.proxy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.util.JsonRecyclerPools;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** Small helpers to read client requests and write JSON answers and OpenAI-style errors. */
final class HttpIo {
    /**
     * Jackson's default buffer pool is per thread; the proxy parses on its event loops, but health probes and admin
     * requests run on new virtual threads. The shared pool (chosen when every request ran on a new virtual thread,
     * whose fresh buffers put {@code BufferRecycler} among the proxy's hottest methods in JFR) serves both.
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

    static void sendError(ClientRequest ex, int status, String type, String message) {
        ex.send(status, "application/json", errorBody(message, type, status));
    }

    static void sendJson(ClientRequest ex, int status, Object value) throws IOException {
        ex.send(status, "application/json", JSON.writeValueAsBytes(value));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
