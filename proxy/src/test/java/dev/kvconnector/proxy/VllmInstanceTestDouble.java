package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * Test double of a vLLM OpenAI-compatible server on a free 127.0.0.1 port. It records every completion
 * request it receives and can be told to fail, stall, stream slowly, hold a stream at a gate, break a
 * stream, or report itself unhealthy. As a prefill instance asked for {@code do_remote_decode} it answers
 * with NIXL-style {@code kv_transfer_params}, as vLLM V1 does. As a decode instance it records the proxy's notices
 * that a concurrent prefill moved ({@code POST /kv/p2p/prefill}) and answers them as a peer-to-peer D would.
 */
final class VllmInstanceTestDouble implements AutoCloseable {

    static {
        if (System.getProperty("sun.net.httpserver.nodelay") == null) {
            System.setProperty("sun.net.httpserver.nodelay", "true");
        }
    }

    /** One completion request as the double received it; {@code rawBody} is its bytes as UTF-8 text. */
    record Received(String path, JsonNode body, String rawBody, String requestIdHeader, String authorization) {
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    final String name;
    private final String model;
    private final HttpServer server;
    final List<Received> received = new CopyOnWriteArrayList<>();
    final List<JsonNode> prefillMoves = new CopyOnWriteArrayList<>();
    private volatile int prefillMoveStatus = 200;
    private final AtomicInteger failuresLeft = new AtomicInteger();
    private volatile int failStatus = 500;
    private volatile long stallMillis;
    private volatile CountDownLatch holdBeforeAnswer;
    private volatile BooleanSupplier answerWhen;
    private volatile int chunks = 3;
    private volatile long chunkDelayMillis;
    private volatile String chunkPadding = "";
    private volatile CountDownLatch gateAfterFirstChunk;
    private volatile int breakAfterChunks = -1;
    private volatile int healthStatus = 200;
    private volatile boolean omitKvTransferParams;
    private volatile int loadedTokens = -1;
    /** Counted down when a write to the proxy fails: the proxy closed the connection. */
    final CountDownLatch sawDisconnect = new CountDownLatch(1);
    /** Counted down when a completion has been fully answered. */
    final AtomicInteger completed = new AtomicInteger();
    /** Streamed chunks written and flushed to the proxy so far (the write returned). */
    final AtomicInteger chunksWritten = new AtomicInteger();
    final AtomicInteger healthProbes = new AtomicInteger();

    VllmInstanceTestDouble(String name, String model) throws IOException {
        this.name = name;
        this.model = model;
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 256);
        server.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        server.createContext("/", this::handle);
        server.start();
    }

    int port() {
        return server.getAddress().getPort();
    }

    String address() {
        return "127.0.0.1:" + port();
    }

    /** The next {@code count} completions answer {@code status} with an error body. */
    VllmInstanceTestDouble failNext(int count, int status) {
        failStatus = status;
        failuresLeft.set(count);
        return this;
    }

    /** Waits this long before sending headers. */
    VllmInstanceTestDouble stall(long millis) {
        stallMillis = millis;
        return this;
    }

    /** Holds every completion (after recording it) until the latch opens. */
    VllmInstanceTestDouble holdUntil(CountDownLatch latch) {
        holdBeforeAnswer = latch;
        return this;
    }

    /**
     * Holds every completion (after recording it) until {@code condition} holds, for up to 20 s. In the concurrent
     * flow the proxy cancels a prefill still in flight when decode is done, so a test that reads what P received or
     * answered makes D wait for it instead of depending on which thread runs first.
     */
    VllmInstanceTestDouble answerWhen(BooleanSupplier condition) {
        answerWhen = condition;
        return this;
    }

    /** Streams {@code n} chunks, sleeping {@code delayMillis} before each. */
    VllmInstanceTestDouble stream(int n, long delayMillis) {
        chunks = n;
        chunkDelayMillis = delayMillis;
        return this;
    }

    /** Pads every streamed chunk's text with this many characters, for large streams. */
    VllmInstanceTestDouble padChunks(int characters) {
        chunkPadding = "p".repeat(characters);
        return this;
    }

    /** After the first streamed chunk, waits until the latch opens before sending the rest. */
    VllmInstanceTestDouble gateAfterFirstChunk(CountDownLatch gate) {
        gateAfterFirstChunk = gate;
        return this;
    }

    /** Drops the connection after {@code n} streamed chunks, with no end of stream. */
    VllmInstanceTestDouble breakAfterChunks(int n) {
        breakAfterChunks = n;
        return this;
    }

    VllmInstanceTestDouble health(int status) {
        healthStatus = status;
        return this;
    }

    VllmInstanceTestDouble omitKvTransferParams() {
        omitKvTransferParams = true;
        return this;
    }

    /**
     * Answers every completion with an {@code x-kvc-loaded-tokens: n} header, as the demo engine reports its KV hit;
     * -1 (the default) sends none, as vLLM does.
     */
    VllmInstanceTestDouble loadedTokens(int n) {
        loadedTokens = n;
        return this;
    }

    List<Received> completions() {
        return List.copyOf(received);
    }

    /** The bodies of the notices that a concurrent prefill moved, in arrival order. */
    List<JsonNode> prefillMoves() {
        return List.copyOf(prefillMoves);
    }

    /** Answers each notice that a concurrent prefill moved with {@code status} (default 200). */
    VllmInstanceTestDouble prefillMoveStatus(int status) {
        prefillMoveStatus = status;
        return this;
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String path = ex.getRequestURI().getPath();
            switch (path) {
                case "/health" -> {
                    healthProbes.incrementAndGet();
                    ex.sendResponseHeaders(healthStatus, -1);
                }
                case "/v1/models" -> send(ex, 200, "{\"object\":\"list\",\"data\":[{\"id\":\"" + model
                        + "\",\"object\":\"model\"}]}");
                case "/v1/completions", "/v1/chat/completions" -> completion(ex, path);
                case "/kv/p2p/prefill" -> {
                    prefillMoves.add(JSON.readTree(ex.getRequestBody().readAllBytes()));
                    send(ex, prefillMoveStatus, "{\"from_layer\":0}");
                }
                default -> send(ex, 404, "{\"error\":{\"message\":\"no route\",\"type\":\"NotFound\",\"code\":404}}");
            }
            ex.close();
        } catch (BrokenOnPurpose e) {
            // Not closing the exchange: the server then drops the connection without ending the chunked body.
            throw e;
        } catch (IOException | RuntimeException e) {
            ex.close();
            throw e;
        }
    }

    private static final class BrokenOnPurpose extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BrokenOnPurpose(String message) {
            super(message, null, false, false);
        }
    }

    private void completion(HttpExchange ex, String path) throws IOException {
        byte[] raw = ex.getRequestBody().readAllBytes();
        JsonNode body = JSON.readTree(raw);
        received.add(new Received(path, body, new String(raw, StandardCharsets.UTF_8),
                ex.getRequestHeaders().getFirst("X-Request-Id"),
                ex.getRequestHeaders().getFirst("Authorization")));
        sleep(stallMillis);
        CountDownLatch hold = holdBeforeAnswer;
        if (hold != null) {
            try {
                hold.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        BooleanSupplier ready = answerWhen;
        long end = System.nanoTime() + 20_000_000_000L;
        while (ready != null && !ready.getAsBoolean() && System.nanoTime() < end) {
            sleep(5);
        }
        if (failuresLeft.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
            send(ex, failStatus, "{\"error\":{\"message\":\"" + name + " failed on purpose\",\"type\":\"TestDouble\","
                    + "\"code\":" + failStatus + "}}");
            return;
        }
        int loaded = loadedTokens;
        if (loaded >= 0) {
            ex.getResponseHeaders().set("x-kvc-loaded-tokens", Integer.toString(loaded));
        }
        boolean chat = path.endsWith("chat/completions");
        if (body.path("stream").asBoolean(false)) {
            stream(ex, chat);
            return;
        }
        ObjectNode answer = JSON.createObjectNode();
        answer.put("id", "cmpl-" + name);
        answer.put("object", chat ? "chat.completion" : "text_completion");
        answer.put("model", model);
        ObjectNode choice = answer.putArray("choices").addObject();
        choice.put("index", 0);
        if (chat) {
            choice.putObject("message").put("role", "assistant").put("content", "answer from " + name);
        } else {
            choice.put("text", "answer from " + name);
        }
        choice.put("finish_reason", "length");
        JsonNode kv = body.get("kv_transfer_params");
        if (kv != null && kv.path("do_remote_decode").asBoolean(false) && !omitKvTransferParams) {
            ObjectNode out = answer.putObject("kv_transfer_params");
            out.put("do_remote_prefill", true);
            out.put("do_remote_decode", false);
            out.put("remote_engine_id", "engine-" + name);
            out.putArray("remote_block_ids").add(1).add(2).add(3);
            out.put("remote_host", "127.0.0.1");
            out.put("remote_port", port());
            out.put("remote_request_id", body.path("request_id").asText());
            out.put("tp_size", 1);
        }
        send(ex, 200, JSON.writeValueAsString(answer));
        completed.incrementAndGet();
    }

    private void stream(HttpExchange ex, boolean chat) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
        ex.sendResponseHeaders(200, 0);
        OutputStream out = ex.getResponseBody();
        try {
            for (int i = 0; i < chunks; i++) {
                sleep(chunkDelayMillis);
                if (i == breakAfterChunks) {
                    // Thrown out of the handler, this makes the JDK server drop the connection mid-body.
                    throw new BrokenOnPurpose(name + " breaks the stream on purpose");
                }
                out.write(chunk(i, chat).getBytes(StandardCharsets.UTF_8));
                out.flush();
                chunksWritten.incrementAndGet();
                CountDownLatch gate = gateAfterFirstChunk;
                if (i == 0 && gate != null && !gate.await(10, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("gate never opened");
                }
            }
            out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
            out.close();
            completed.incrementAndGet();
        } catch (IOException e) {
            sawDisconnect.countDown();
            throw e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    String chunk(int i, boolean chat) {
        return chat
                ? "data: {\"id\":\"chat-" + name + "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + i + "\"}}]}\n\n"
                : "data: {\"id\":\"cmpl-" + name + "\",\"choices\":[{\"index\":0,\"text\":\"t" + i + chunkPadding
                        + "\"}]}\n\n";
    }

    private static void send(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
    }

    private static void sleep(long millis) {
        if (millis <= 0) {
            return;
        }
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
