package dev.kvconnector.proxy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.util.JsonRecyclerPools;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** Small helpers to read client requests and write JSON answers and OpenAI-style errors. */
final class HttpIo {
    /**
     * Jackson's default buffer pool is per thread; the proxy parses on its event loops, but health probes and admin
     * requests run on new virtual threads. The shared pool (chosen when every request ran on a new virtual thread,
     * whose fresh buffers put {@code BufferRecycler} among the proxy's hottest methods in JFR) serves both.
     * Decimals are read as {@code BigDecimal}, trailing zeros kept, so a client's number reaches the instances with
     * every digit it had (a {@code double} would round {@code 0.12345678901234567890} and drop the zero of
     * {@code 1.50}).
     */
    static final ObjectMapper JSON = JsonMapper.builder(JsonFactory.builder()
                    .recyclerPool(JsonRecyclerPools.sharedConcurrentDequePool()).build())
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES)
            .build();

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

    /** Same as {@link #errorBody(String, String, String, int)} for an error that is about no one field. */
    static byte[] errorBody(String message, String type, int code) {
        return errorBody(message, type, null, code);
    }

    /**
     * Builds {@code {"error":{"message","type","param","code"}}}, the shape OpenAI clients and vLLM use:
     * {@code param} names the request field at fault (JSON null when none), {@code code} is the HTTP status.
     */
    static byte[] errorBody(String message, String type, String param, int code) {
        ObjectNode root = JSON.createObjectNode();
        ObjectNode err = root.putObject("error");
        err.put("message", message);
        err.put("type", type);
        err.put("param", param);
        err.put("code", code);
        try {
            return JSON.writeValueAsBytes(root);
        } catch (IOException e) {
            throw new IllegalStateException("cannot serialise an error body", e);
        }
    }

    static void sendError(ClientRequest ex, int status, String type, String message) {
        sendError(ex, status, type, null, message);
    }

    static void sendError(ClientRequest ex, int status, String type, String param, String message) {
        ex.send(status, "application/json", errorBody(message, type, param, status));
    }

    static void sendJson(ClientRequest ex, int status, Object value) throws IOException {
        ex.send(status, "application/json", JSON.writeValueAsBytes(value));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
