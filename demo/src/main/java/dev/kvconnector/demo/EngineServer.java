package dev.kvconnector.demo;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An OpenAI-compatible HTTP front for one {@link Engine}, as a vLLM instance serves it:
 * <ul>
 *   <li>{@code POST /v1/completions}: {@code prompt} (a string, or token ids), {@code max_tokens} (default 16),
 *       {@code stream} (server-sent events {@code data: {...}} then {@code data: [DONE]}), and
 *       {@code kv_transfer_params} in the request and, from a producer, in the response; every successful answer,
 *       streamed or not, carries {@value #LOADED_TOKENS_HEADER}: the prompt tokens whose KV the engine loaded for
 *       it or took from its own prefix cache (0 on a miss or a recomputed prefill), for the proxy's predicted against
 *       actual hits;</li>
 *   <li>{@code GET /v1/models}: the one served model;</li>
 *   <li>{@code GET /health}: 200 with an empty body;</li>
 *   <li>{@code GET /kv/metrics}: the engine's, its prefix cache's, its decode saves', the connector's and the store's
 *       counters as JSON
 *       (prefill passes, loads, misses by reason, layer latencies in microseconds, bytes per tier of a
 *       {@code tiered:} store), so a demo can show what each instance did; a peer-to-peer engine's
 *       {@code connector} also has them per transport under {@code transports} ({@code p2p}, {@code store});</li>
 *   <li>{@code POST /kv/p2p/send} (a producer with {@code --transport p2p} or {@code p2p+store}): D's destination
 *       as {@code kv_transfer_params}. When P's prefill of that transfer id has ended, P writes it there and
 *       answers 200 with {@code sent_bytes}; otherwise 202: P writes each layer as its prefill computes it (a
 *       destination no prefill comes for is dropped after a minute). 400 for a destination that does not fit.</li>
 *   <li>{@code POST /kv/p2p/prefill} (a consumer with {@code --transport p2p} or {@code p2p+store}): the proxy's
 *       notice that it retried a transfer's prefill on another P, {@code {"transfer_id", "remote_host",
 *       "remote_port"}}. 200 with {@code from_layer} when D's request waits (D asks that P for the layers from
 *       there on), 202 when it has not begun (the notice is held for it), 409 when it has ended, 404 from an engine
 *       that loads nothing peer to peer, 400 for a notice without those fields. With {@code kvc_prefill_abandoned}
 *       true instead of a P, the proxy gave the prefill up: D's request recomputes at once (200, or 202 held). A D
 *       that loads layer-wise through the store takes both: a move needs nothing (200: the retried P writes the
 *       store under the same transfer id), a prefill given up ends its waiting load at once (200, or 202 held).</li>
 * </ul>
 * Decoding is greedy whatever the sampling fields say. Bad requests get 400 with an OpenAI-style error object,
 * a body that is not JSON 415, an unknown model 404, a full cache 503. Each request runs on a virtual thread.
 *
 * <p>Over 400 lines: the whole HTTP surface of one engine, a method per endpoint, and the OpenAI-style bodies they
 * share.
 */
public final class EngineServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EngineServer.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_BODY_BYTES = 4 << 20;
    private static final int DEFAULT_MAX_TOKENS = 16;
    /** The response header with the request's loaded prompt tokens (see the class comment and the proxy README). */
    public static final String LOADED_TOKENS_HEADER = "x-kvc-loaded-tokens";

    private final Engine engine;
    /** The engine's store, whose own counters {@code /kv/metrics} reports where it keeps any; or null. */
    private final KVStore store;
    private final String modelName;
    private final HttpServer http;
    private final ExecutorService executor;
    private final long created = System.currentTimeMillis() / 1000;

    private EngineServer(Engine engine, KVStore store, String modelName, HttpServer http, ExecutorService executor) {
        this.engine = engine;
        this.store = store;
        this.modelName = modelName;
        this.http = http;
        this.executor = executor;
    }

    /**
     * Binds {@code host:port} (port 0 picks a free one) and starts serving {@code engine} as {@code modelName}.
     *
     * @throws UncheckedIOException when the address cannot be bound
     */
    public static EngineServer start(Engine engine, String host, int port, String modelName) {
        return start(engine, null, host, port, modelName);
    }

    /**
     * As {@link #start(Engine, String, int, String)}, reporting in {@code /kv/metrics} the counters of
     * {@code store} (the engine's connector's store, or null) where it keeps any ({@link StoreStats}).
     */
    public static EngineServer start(Engine engine, KVStore store, String host, int port, String modelName) {
        HttpServer http;
        try {
            http = HttpServer.create(new InetSocketAddress(host, port), 0);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot bind " + host + ":" + port + " (in use, or not a local address)", e);
        }
        ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
        EngineServer s = new EngineServer(engine, store, modelName, http, executor);
        http.setExecutor(executor);
        http.createContext("/v1/completions", s::completions);
        http.createContext("/v1/models", s::models);
        http.createContext("/health", s::health);
        http.createContext("/kv/metrics", s::kvMetrics);
        http.createContext(P2pTransport.SEND_PATH, s::p2pSend);
        http.createContext(P2pTransport.PREFILL_PATH, s::p2pPrefillMoved);
        http.start();
        LOG.info("serving {} ({}) on http://{}:{}", modelName, engine.role().vllmName(), host, s.port());
        return s;
    }

    /** The bound port. */
    public int port() {
        return http.getAddress().getPort();
    }

    /** {@code http://host:port}. */
    public URI baseUri() {
        InetSocketAddress a = http.getAddress();
        return URI.create("http://" + a.getHostString() + ":" + a.getPort());
    }

    /** Stops accepting requests, waits up to 1 s for running ones, and stops the executor. */
    @Override
    public void close() {
        http.stop(1);
        executor.close();
    }

    private void health(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"GET".equals(ex.getRequestMethod())) {
                error(ex, 405, "use GET /health");
                return;
            }
            ex.sendResponseHeaders(200, -1);
        }
    }

    private void models(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"GET".equals(ex.getRequestMethod())) {
                error(ex, 405, "use GET /v1/models");
                return;
            }
            ObjectNode root = JSON.createObjectNode().put("object", "list");
            root.putArray("data").addObject().put("id", modelName).put("object", "model").put("created", created)
                    .put("owned_by", "kvconnector").put("root", engine.config().modelId())
                    .put("max_model_len", engine.config().maxContext());
            json(ex, 200, root);
        }
    }

    private void kvMetrics(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"GET".equals(ex.getRequestMethod())) {
                error(ex, 405, "use GET /kv/metrics");
                return;
            }
            EngineMetrics m = engine.metrics();
            ObjectNode root = JSON.createObjectNode().put("engine_id", engine.engineId())
                    .put("role", engine.role().vllmName()).put("model_id", engine.config().modelId());
            ObjectNode e = root.putObject("engine").put("requests", m.requests())
                    .put("prompt_tokens", m.promptTokens())
                    .put("prefill_passes", m.prefillPasses()).put("prefill_tokens", m.prefillTokens())
                    .put("decode_steps", m.decodeSteps()).put("loaded_prefills", m.loadedPrefills())
                    .put("partial_loads", m.partialLoads()).put("load_failures", m.loadFailures())
                    .put("inserts", m.inserts()).put("insert_failures", m.insertFailures());
            ObjectNode misses = e.putObject("misses");
            m.misses().forEach((reason, n) -> misses.put(reason.name(), n));
            PrefixCacheStats pc = engine.prefixCacheStats();
            if (pc != null) {
                e.putObject("prefix_cache").put("chunk_tokens", pc.chunkTokens()).put("chunks", pc.chunks())
                        .put("blocks", pc.blocks()).put("held_chunks", pc.heldChunks()).put("hit_tokens", pc.hitTokens())
                        .put("stored_chunks", pc.storedChunks()).put("evicted_chunks", pc.evictedChunks());
            }
            DecodeSaveStats ds = engine.decodeSaveStats();
            if (ds != null) {
                e.putObject("decode_save").put("saves", ds.saves()).put("skipped", ds.skipped())
                        .put("new_chunks", ds.newChunks()).put("rewritten_chunks", ds.rewrittenChunks())
                        .put("failures", ds.failures());
            }
            if (store != null) {
                StoreStats.write(store, root.putObject("store"));
            }
            if (engine.connector() == null) {
                root.putNull("connector");
            } else {
                ObjectNode cn = connectorMetrics(root.putObject("connector"), engine.connector());
                ObjectNode tn = JSON.createObjectNode();
                engine.transports().forEach((name, c) -> connectorMetrics(tn.putObject(name), c));
                if (!tn.isEmpty()) {
                    cn.set("transports", tn);
                }
            }
            json(ex, 200, root);
        }
    }

    /**
     * The {@code kv_transfer_params} POSTed to {@code path}; null once it answered 405 (another method) or 400 (a body
     * that is not what "the body must {@code must}" says).
     */
    private KVTransferParams postedParams(HttpExchange ex, String path, String must) throws IOException {
        if (!"POST".equals(ex.getRequestMethod())) {
            error(ex, 405, "use POST " + path);
            return null;
        }
        try {
            return KVTransferParams.fromJsonNode(JSON.readTree(ex.getRequestBody().readNBytes(MAX_BODY_BYTES)));
        } catch (IOException | KVException e) {
            error(ex, 400, "the body must " + must + ": " + e.getMessage());
            return null;
        }
    }

    /** P, peer to peer: D's destination ({@code kv_transfer_params}) in, the held request written into it. */
    private void p2pSend(HttpExchange ex) throws IOException {
        try (ex) {
            KVTransferParams destination = postedParams(ex, P2pTransport.SEND_PATH, "be D's kv_transfer_params");
            if (destination == null) {
                return;
            }
            try {
                long sent = engine.sendToPeer(destination);
                ObjectNode answer = JSON.createObjectNode().put("transfer_id", destination.transferId());
                json(ex, sent >= 0 ? 200 : 202, sent >= 0 ? answer.put("sent_bytes", sent)
                        : answer.put("state", "writing as the prefill computes each layer"));
            } catch (KVException e) {
                error(ex, switch (e.code()) {
                    case INVALID_ARGUMENT, SHAPE_MISMATCH, INVALID_CONFIG -> 400;
                    default -> 500;
                }, e.getMessage());
            }
        }
    }

    /** D, peer to peer: the proxy's notice that a transfer's prefill moved to another P. */
    private void p2pPrefillMoved(HttpExchange ex) throws IOException {
        try (ex) {
            KVTransferParams notice = postedParams(ex, P2pTransport.PREFILL_PATH,
                    "name transfer_id, remote_host and remote_port");
            if (notice == null) {
                return;
            }
            if (engine.loadsLayerWiseThroughStore() && !P2pTransport.givenUp(notice)) {
                json(ex, 200, JSON.createObjectNode().put("transfer_id", notice.transferId()).put("state",
                        "loads through the store: a retried prefill writes there under the same transfer id; "
                                + "nothing to move"));
                return;
            }
            try {
                int from = engine.prefillMoved(notice);
                ObjectNode answer = JSON.createObjectNode().put("transfer_id", notice.transferId());
                if (from < 0) {
                    answer.put("state", "held until D's request for it begins");
                } else if (P2pTransport.givenUp(notice)) {
                    answer.put("state", "the prefill was given up: D recomputes");
                } else {
                    answer.put("from_layer", from);
                }
                json(ex, from >= 0 ? 200 : 202, answer);
            } catch (KVException e) {
                error(ex, switch (e.code()) {
                    case INVALID_ARGUMENT -> 400;
                    case UNSUPPORTED -> 404;
                    case CLOSED -> 409;
                    default -> 500;
                }, e.getMessage());
            }
        }
    }

    /** The connector's counters and layer latencies into {@code cn}; with peer to peer, per transport too. */
    private static ObjectNode connectorMetrics(ObjectNode cn, KVStoreConnector connector) {
        ConnectorMetrics.Snapshot c = connector.metrics();
        cn.put("store", connector.endpoint()).put("hits", c.hits()).put("partial_hits", c.partialHits())
                .put("commits", c.commits()).put("aborts", c.aborts()).put("inserted_bytes", c.insertedBytes())
                .put("dropped_bytes", c.droppedBytes());
        ObjectNode cm = cn.putObject("misses");
        c.misses().forEach((reason, n) -> cm.put(reason.name(), n));
        latency(cn.putObject("insert_layer"), c.insertLayer());
        latency(cn.putObject("drop_layer"), c.dropLayer());
        latency(cn.putObject("drop_wait"), c.dropWait());
        return cn;
    }

    private static void latency(ObjectNode o, ConnectorMetrics.LatencySummary l) {
        o.put("count", l.count()).put("p50_us", l.p50Nanos() / 1000.0).put("p99_us", l.p99Nanos() / 1000.0)
                .put("max_us", l.maxNanos() / 1000.0);
    }

    private void completions(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"POST".equals(ex.getRequestMethod())) {
                error(ex, 405, "use POST /v1/completions");
                return;
            }
            String type = ex.getRequestHeaders().getFirst("Content-Type");
            if (type != null && !type.toLowerCase(Locale.ROOT).startsWith("application/json")) {
                error(ex, 415, "Content-Type must be application/json, not " + type);
                return;
            }
            Request req;
            try {
                req = parse(ex.getRequestBody());
            } catch (KVException e) {
                error(ex, 400, e.getMessage());
                return;
            }
            if (req.model != null && !req.model.equals(modelName)) {
                error(ex, 404, "The model `" + req.model + "` does not exist; this instance serves `" + modelName + "`");
                return;
            }
            if (req.stream) {
                stream(ex, req);
            } else {
                complete(ex, req);
            }
        }
    }

    private record Request(String model, int[] prompt, int maxTokens, boolean stream, KVTransferParams params) {
    }

    private static Request parse(InputStream body) throws IOException {
        byte[] bytes = body.readNBytes(MAX_BODY_BYTES + 1);
        if (bytes.length > MAX_BODY_BYTES) {
            throw badRequest("the request body exceeds " + MAX_BODY_BYTES + " bytes");
        }
        JsonNode root;
        try {
            root = JSON.readTree(bytes);
        } catch (JsonProcessingException e) {
            throw badRequest("the body is not JSON: " + e.getOriginalMessage());
        }
        if (root == null || !root.isObject()) {
            throw badRequest("the body must be a JSON object");
        }
        JsonNode model = root.get("model");
        JsonNode p = root.get("prompt");
        int[] prompt;
        if (p != null && p.isTextual()) {
            prompt = ByteTokenizer.encode(p.asText());
        } else if (p != null && p.isArray() && !p.isEmpty() && p.get(0).isIntegralNumber()) {
            prompt = new int[p.size()];
            for (int i = 0; i < prompt.length; i++) {
                if (!p.get(i).canConvertToInt()) {
                    throw badRequest("prompt token " + i + " is not an int: " + p.get(i));
                }
                prompt[i] = p.get(i).intValue();
            }
        } else {
            throw badRequest("'prompt' must be a non-empty string or an array of token ids");
        }
        JsonNode mt = root.get("max_tokens");
        if (mt != null && !mt.isNull() && !mt.canConvertToInt()) {
            throw badRequest("'max_tokens' must be an integer, got " + mt);
        }
        int maxTokens = mt == null || mt.isNull() ? DEFAULT_MAX_TOKENS : mt.intValue();
        JsonNode st = root.get("stream");
        if (st != null && !st.isNull() && !st.isBoolean()) {
            throw badRequest("'stream' must be a boolean, got " + st);
        }
        JsonNode kv = root.get("kv_transfer_params");
        KVTransferParams params = kv == null || kv.isNull() ? null : KVTransferParams.fromJsonNode(kv);
        return new Request(model == null || model.isNull() ? null : model.asText(), prompt, maxTokens,
                st != null && st.asBoolean(), params);
    }

    private static KVException badRequest(String detail) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, detail).operation("completions").build();
    }

    private void complete(HttpExchange ex, Request req) throws IOException {
        Generation g;
        try {
            g = engine.generate(req.prompt, req.maxTokens, req.params, loaded -> ex.getResponseHeaders()
                    .set(LOADED_TOKENS_HEADER, Integer.toString(loaded)), t -> { });
        } catch (KVException e) {
            error(ex, statusOf(e), e.getMessage());
            return;
        }
        String id = "cmpl-" + UUID.randomUUID();
        ObjectNode root = chunk(id, "text_completion", ByteTokenizer.decode(g.tokens()), "length");
        root.putObject("usage").put("prompt_tokens", g.promptTokens()).put("completion_tokens", g.tokens().length)
                .put("total_tokens", g.promptTokens() + g.tokens().length);
        putTokenIds(root, g);
        putParams(root, g);
        json(ex, 200, root);
    }

    private void stream(HttpExchange ex, Request req) throws IOException {
        String id = "cmpl-" + UUID.randomUUID();
        ByteTokenizer.Stream decoder = new ByteTokenizer.Stream();
        OutputStream[] out = new OutputStream[1];
        Generation g;
        try {
            g = engine.generate(req.prompt, req.maxTokens, req.params, loaded -> ex.getResponseHeaders()
                    .set(LOADED_TOKENS_HEADER, Integer.toString(loaded)), token -> {
                try {
                    if (out[0] == null) {
                        ex.getResponseHeaders().set("Content-Type", "text/event-stream");
                        ex.getResponseHeaders().set("Cache-Control", "no-cache");
                        ex.sendResponseHeaders(200, 0);
                        out[0] = ex.getResponseBody();
                    }
                    String text = decoder.next(token);
                    if (!text.isEmpty()) {
                        event(out[0], chunk(id, "text_completion", text, null).toString());
                    }
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (KVException e) {
            if (out[0] == null) {
                error(ex, statusOf(e), e.getMessage());
            } else {
                event(out[0], errorBody(statusOf(e), e.getMessage()).toString());
            }
            return;
        } catch (UncheckedIOException e) {
            LOG.debug("client went away mid-stream: {}", e.getCause().toString());
            return;
        }
        ObjectNode last = chunk(id, "text_completion", decoder.finish(), "length");
        putTokenIds(last, g);
        putParams(last, g);
        event(out[0], last.toString());
        event(out[0], "[DONE]");
    }

    private static void event(OutputStream out, String data) throws IOException {
        out.write(("data: " + data + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private ObjectNode chunk(String id, String object, String text, String finishReason) {
        ObjectNode root = JSON.createObjectNode().put("id", id).put("object", object)
                .put("created", System.currentTimeMillis() / 1000).put("model", modelName);
        ArrayNode choices = root.putArray("choices");
        ObjectNode c = choices.addObject().put("index", 0).put("text", text);
        c.putNull("logprobs");
        if (finishReason == null) {
            c.putNull("finish_reason");
        } else {
            c.put("finish_reason", finishReason);
        }
        return root;
    }

    /**
     * All generated token ids, as vLLM's {@code token_ids} in the choice (in the last chunk when streamed): the text
     * alone cannot prove two answers equal, since malformed UTF-8 decodes to U+FFFD whatever the bytes were.
     */
    private static void putTokenIds(ObjectNode root, Generation g) {
        ArrayNode ids = ((ObjectNode) root.get("choices").get(0)).putArray("token_ids");
        for (int t : g.tokens()) {
            ids.add(t);
        }
    }

        /** A producer's answer, plus where it runs, as vLLM's prefill instances answer ({@code remote_host/port}). */
    private void putParams(ObjectNode root, Generation g) {
        if (g.kvTransferParams() != null) {
            InetSocketAddress a = http.getAddress();
            root.set("kv_transfer_params", g.kvTransferParams().toBuilder().remoteHost(a.getHostString())
                    .remotePort(a.getPort()).build().toJsonNode());
        } else {
            root.putNull("kv_transfer_params");
        }
    }

    private static int statusOf(KVException e) {
        return switch (e.code()) {
            case INVALID_ARGUMENT, SHAPE_MISMATCH, DTYPE_MISMATCH -> 400;
            case BUSY -> 503;
            default -> 500;
        };
    }

    private static ObjectNode errorBody(int status, String message) {
        ObjectNode root = JSON.createObjectNode();
        root.putObject("error").put("message", message)
                .put("type", status == 400 ? "BadRequestError" : status == 404 ? "NotFoundError" : status == 409
                        ? "ConflictError" : "ServerError")
                .put("code", status);
        return root;
    }

    private static void error(HttpExchange ex, int status, String message) throws IOException {
        json(ex, status, errorBody(status, message));
    }

    private static void json(HttpExchange ex, int status, JsonNode body) throws IOException {
        byte[] bytes = JSON.writeValueAsBytes(body);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(bytes);
        }
    }
}
