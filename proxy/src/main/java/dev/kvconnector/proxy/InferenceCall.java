package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.EventLoop;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One client completion request driven through P and D, on the event loop of the client's connection: every
 * step is a callback there, so a chunk of D's stream goes to the client on the thread that read it. Exactly one
 * answer goes to the client: either D's (passed through), a 4xx of P or D (the client's own error, passed
 * through), or an OpenAI-style error naming the instance and cause.
 *
 * <p>Over 400 lines because one request's steps (P's call and its retries, the hand-over of kv_transfer_params,
 * D's call and its retries, the stream and the one answer to the client) are callbacks on one event loop that
 * share the request's state; split, that state would be shared between classes.
 */
final class InferenceCall {
    private static final Logger LOG = LoggerFactory.getLogger(InferenceCall.class);
    private static final int ERROR_SNIPPET_BYTES = 64 << 10;
    /**
     * D's endpoint for the notice that the concurrent flow's prefill moved to another P (a kvconnector peer-to-peer
     * decode engine serves it).
     */
    static final String PREFILL_MOVED_PATH = "/kv/p2p/prefill";
    /** The field of D's {@code kv_transfer_params} saying that the prefill may move, and D be told. */
    static final String MAY_MOVE_FIELD = "kvc_prefill_may_move";
    /** The field of a notice to {@value #PREFILL_MOVED_PATH} saying that the proxy gave the prefill up. */
    static final String ABANDONED_FIELD = "kvc_prefill_abandoned";

    private final XpydProxy proxy;
    private final ProxyConfig config;
    private final ClientRequest client;
    private final EventLoop loop;
    private final ObjectNode body;
    private final String requestId;
    private final boolean stream;
    private final long affinity;
    /** What the prefix index says about the prompt under {@link Policy#KV_AWARE}, else null. */
    private final KvRoute route;
    /** Whether the kv-aware policy sent the request straight to D, so D's reported hit is the one predicted. */
    private boolean kvDecodeOnly;
    private final long startNanos;
    private boolean clientGone;
    private boolean responded;
    private boolean finished;

    private byte[] prefillBytes;
    private int prefillAttempts;
    private List<Instance> prefillTried;
    private String lastPrefillFailure;

    private byte[] decodeBytes;
    private int decodeAttempts;
    private List<Instance> decodeTried;
    private String lastDecodeFailure;

    /** The exchange in flight for this call's sequential steps (V0/V1 prefill, decode). */
    private UpstreamExchange current;
    private ConcurrentPrefill concurrentPrefill;
    /** The concurrent prefill failed for good before D was called (no P could be picked): D's params say so. */
    private boolean prefillGivenUpBeforeDecode;

    InferenceCall(XpydProxy proxy, ClientRequest client, ObjectNode body, String requestId, long startNanos) {
        this.proxy = proxy;
        this.config = proxy.config;
        this.client = client;
        this.loop = client.channel.eventLoop();
        this.body = body;
        this.requestId = requestId;
        this.stream = body.path("stream").asBoolean(false);
        this.affinity = config.policy() == Policy.PREFIX_AFFINITY
                ? PromptAffinity.hash(body, config.prefixAffinityChars()) : 0L;
        this.route = proxy.kvRouter() == null ? null : proxy.kvRouter().route(body);
        this.startNanos = startNanos;
    }

    /** Starts the call; call on the client's event loop. */
    void start() {
        client.call = this;
        if (!client.channel.isActive()) {
            clientGone();
            return;
        }
        KvMetrics.Reason decodeOnly = route == null ? null : route.decodeOnly(config.kvDecodeMaxSuffix());
        if (route != null && route.unhashed != null) {
            proxy.kvRouter().metrics.decided(route.unhashed);
        } else if (decodeOnly != null) {
            // The store holds every chunk, or all but a short suffix: D loads what it holds and computes the rest,
            // nothing to prefill. A stale index entry makes this a miss on D, which recomputes: slower, never a failure.
            proxy.kvRouter().metrics.decided(decodeOnly);
            proxy.metrics.kvDecodeOnly.increment();
            kvDecodeOnly = true;
            startDecode(null);
            return;
        }
        switch (config.flow()) {
            case V0, V1 -> {
                prefillBytes = json(prefillBody());
                nextPrefill();
            }
            case CONCURRENT -> startConcurrent();
        }
    }

    /** The client's connection closed: whatever is in flight upstream is abandoned. On the event loop. */
    void clientGone() {
        if (finished || clientGone) {
            return;
        }
        clientGone = true;
        proxy.metrics.clientDisconnects.increment();
        if (current != null) {
            LOG.debug("request {}: client went away; cancelled {}", requestId, current.instance);
            current.cancel();
            proxy.metrics.of(current.instance).latency.record(current.elapsedSeconds());
        }
        finish();
    }

    /** The client can take more bytes: read D's stream again. On the event loop. */
    void clientWritable() {
        if (current != null) {
            current.resumeReading();
        }
    }

    // ---- prefill ---------------------------------------------------------------------------------

    /** Builds P's copy of the request for the configured flow. */
    ObjectNode prefillBody() {
        ObjectNode p = body.deepCopy();
        p.put("max_tokens", 1);
        if (p.has("max_completion_tokens")) {
            p.put("max_completion_tokens", 1);
        }
        if (config.flow() != ProxyFlow.V0) {
            p.put("stream", false);
            // vLLM rejects stream_options on a non-streamed request.
            p.remove("stream_options");
            ObjectNode kv = p.putObject("kv_transfer_params");
            if (config.flow() == ProxyFlow.CONCURRENT) {
                kv.put("transfer_id", requestId);
            }
            kv.put("do_remote_decode", true);
            kv.put("do_remote_prefill", false);
        }
        p.put("request_id", requestId);
        return p;
    }

    /** The next prefill attempt, or the end of the prefill when none is left. */
    private void nextPrefill() {
        if (prefillAttempts < config.maxPrefillAttempts()) {
            Instance p = proxy.selector(Role.PREFILL).pick(proxy.pool.list(Role.PREFILL), prefillTried, affinity,
                    route);
            if (p != null) {
                if (prefillAttempts == 0) {
                    recordKvDecision(p);
                }
                if (prefillAttempts > 0) {
                    proxy.metrics.prefillRetries.increment();
                }
                prefillAttempts++;
                prefillOnce(p);
                return;
            }
        }
        prefillExhausted();
    }

    /** Counts the kv-aware decision for a hashed prompt's first prefill: to a cache hit, or by load. */
    private void recordKvDecision(Instance p) {
        if (route != null && route.unhashed == null) {
            proxy.kvRouter().metrics.decided(route.overlap(proxy.kvRouter().publisher(p)) > 0
                    ? KvMetrics.Reason.CACHE_HIT : KvMetrics.Reason.LOAD);
        }
    }

    /**
     * Compares the index's prediction for {@code instance} with the tokens its engine reports having loaded
     * ({@link KvMetrics#LOADED_TOKENS_HEADER}), for a hashed prompt under kv-aware; an answer without it is counted
     * unreported. Only counts: a prediction that was wrong never changes the answer.
     */
    private void comparePrediction(Instance instance, UpstreamExchange ex) {
        if (route != null && route.unhashed == null) {
            KvRouter kv = proxy.kvRouter();
            kv.metrics.compare(kvDecodeOnly ? route.predictedDecodeOnlyTokens()
                    : route.predictedPrefillTokens(kv.publisher(instance)), ex.header(KvMetrics.LOADED_TOKENS_HEADER));
        }
    }

    private void prefillFailed(Instance p, String failure) {
        lastPrefillFailure = failure;
        if (config.onPrefillFailure() == PrefillFailureMode.DECODE_ONLY) {
            prefillExhausted();
            return;
        }
        if (prefillTried == null) {
            prefillTried = new ArrayList<>(config.maxPrefillAttempts());
        }
        prefillTried.add(p);
        nextPrefill();
    }

    private void prefillExhausted() {
        if (config.onPrefillFailure() == PrefillFailureMode.DECODE_ONLY) {
            proxy.metrics.decodeOnlyFallbacks.increment();
            LOG.warn("request {}: prefill failed ({}); decode computes the prompt alone", requestId,
                    lastPrefillFailure == null ? "no healthy prefill instance" : lastPrefillFailure);
            startDecode(null);
        } else if (lastPrefillFailure == null) {
            respondError(503, "service_unavailable", "no healthy prefill instance (all "
                    + proxy.pool.list(Role.PREFILL).size() + " ejected or none configured); check /status");
        } else {
            respondError(502, "upstream_error", "prefill failed: " + lastPrefillFailure);
        }
    }

    private void prefillOnce(Instance p) {
        ProxyMetrics.InstanceStats stats = proxy.metrics.of(p);
        current = send(p, prefillBytes, new Buffered() {
            @Override
            void headers(UpstreamExchange ex, int status) {
                stats.firstByte.record(ex.elapsedSeconds());
                ex.arm(deadline(ex, config.totalTimeout()), "response body");
                if (status < 400) {
                    comparePrediction(p, ex);
                }
                if (status >= 500) {
                    collect(ERROR_SNIPPET_BYTES);
                } else if (status >= 400 || config.flow() == ProxyFlow.V1) {
                    collect(config.maxResponseBytes());
                } else {
                    // V0 and the rest: only the prefill's side effect in the KV store matters.
                    discard();
                }
            }

            @Override
            void complete(UpstreamExchange ex, int status, byte[] answer) {
                stats.latency.record(ex.elapsedSeconds());
                current = null;
                if (status >= 500) {
                    stats.errors.increment();
                    prefillFailed(p, p + " answered " + status + ": " + snippet(answer));
                } else if (status >= 400) {
                    // The client's request is at fault (a prompt too long, an unknown model): D would say the same.
                    respondRaw(status, ex.header("Content-Type"), answer);
                } else if (config.flow() == ProxyFlow.V0) {
                    startDecode(null);
                } else if (parseKvParams(answer) instanceof ObjectNode kv) {
                    startDecode(kv);
                } else {
                    stats.errors.increment();
                    prefillFailed(p, p + " answered without a kv_transfer_params object: is it started with"
                            + " --kv-transfer-config and kv_role kv_producer (or kv_both)?");
                }
            }

            @Override
            public void onFailure(UpstreamExchange ex, UpstreamFailure f) {
                stats.latency.record(ex.elapsedSeconds());
                current = null;
                countFailure(stats, f);
                proxy.onUnreachable(f);
                prefillFailed(p, f.getMessage());
            }
        });
        current.arm(deadline(current, config.firstByteTimeout()), "response headers");
    }

    private static JsonNode parseKvParams(byte[] answer) {
        try {
            return HttpIo.JSON.readTree(answer).get("kv_transfer_params");
        } catch (IOException e) {
            return null;
        }
    }

    // ---- concurrent ------------------------------------------------------------------------------

    private void startConcurrent() {
        concurrentPrefill = new ConcurrentPrefill(json(prefillBody()));
        concurrentPrefill.next();
        startDecode(concurrentDecodeParams(concurrentPrefill.first));
    }

    /**
     * D's {@code kv_transfer_params} in the concurrent flow: the transfer id P shares and, when a P was picked, where
     * it is, in vLLM V1's {@code remote_host}/{@code remote_port} (as the proxy reaches it), so that a peer-to-peer D
     * can send that P where the KV goes while P computes. When no P could be picked at all, they carry
     * {@value #ABANDONED_FIELD} true instead: no prefill comes, and a kvconnector D computes without waiting for one.
     * When the prefill may be retried on another P
     * ({@link PrefillFailureMode#RETRY} with more than one attempt), {@value #MAY_MOVE_FIELD} says so: D already
     * has its params when a retry picks another P, so the proxy then tells D where the prefill moved
     * ({@link #announcePrefillMove}), and D waits for that P rather than recompute when the first one aborts; when
     * every attempt failed, D is told that too ({@link #announcePrefillAbandoned}).
     */
    ObjectNode concurrentDecodeParams(Instance p) {
        ObjectNode kv = HttpIo.JSON.createObjectNode();
        kv.put("transfer_id", requestId);
        kv.put("do_remote_decode", false);
        kv.put("do_remote_prefill", true);
        if (p != null) {
            kv.put("remote_host", p.address.host());
            kv.put("remote_port", p.address.port());
            if (config.onPrefillFailure() == PrefillFailureMode.RETRY && config.maxPrefillAttempts() > 1) {
                kv.put(MAY_MOVE_FIELD, true);
            }
        }
        if (prefillGivenUpBeforeDecode) {
            kv.put(ABANDONED_FIELD, true);
        }
        return kv;
    }

    /**
     * The concurrent prefill was retried on {@code p}: a decode sent from now on names {@code p}, and the D waiting
     * now is told with a {@code POST} of {@value #PREFILL_MOVED_PATH} ({@code transfer_id}, {@code remote_host},
     * {@code remote_port}), so that a peer-to-peer D takes the KV from {@code p}. The notice is not waited for; a D
     * that does not take it is logged, naming D and the transfer id, and times out waiting for the first P as it
     * would have without the notice (it then recomputes: slower, never a wrong answer).
     */
    private void announcePrefillMove(Instance p) {
        ObjectNode kv = (ObjectNode) body.get("kv_transfer_params");
        kv.put("remote_host", p.address.host());
        kv.put("remote_port", p.address.port());
        decodeBytes = json(body);
        tellDecode(HttpIo.JSON.createObjectNode().put("transfer_id", requestId).put("remote_host", p.address.host())
                .put("remote_port", p.address.port()), p);
    }

    /**
     * The concurrent prefill failed for good (every attempt, or the only one in decode-only mode): a decode sent from
     * now on names no P, and the D waiting now is told with a notice ({@value #ABANDONED_FIELD}) that no P will write
     * the transfer, so that a D waiting for it (peer to peer, or layer-wise through a store) recomputes at once instead
     * of waiting for its layer timeout. Not waited for; a D that does not take it is logged, and times out.
     */
    private void announcePrefillAbandoned() {
        if (current == null) {
            // No decode in flight: D is not called yet (no P could be picked at all), and its params will say so
            // (concurrentDecodeParams), or it has answered.
            prefillGivenUpBeforeDecode = true;
            return;
        }
        ObjectNode kv = (ObjectNode) body.get("kv_transfer_params");
        kv.remove(List.of("remote_host", "remote_port", MAY_MOVE_FIELD));
        decodeBytes = json(body);
        tellDecode(HttpIo.JSON.createObjectNode().put("transfer_id", requestId).put(ABANDONED_FIELD, true), null);
    }

    /** Posts {@code notice} to the D of the decode in flight, if any; {@code movedTo}: the new P, null for none. */
    private void tellDecode(ObjectNode notice, Instance movedTo) {
        if (current == null) {
            return;
        }
        Instance d = current.instance;
        UpstreamExchange ex = UpstreamExchange.send(proxy.upstream, loop, d, PREFILL_MOVED_PATH, requestId,
                client.headers.get("Authorization"), json(notice), new PrefillNotice(d, movedTo));
        ex.arm(deadline(ex, config.firstByteTimeout()), "the answer to the notice on the prefill");
    }

    /**
     * The answer of D to {@link #announcePrefillMove} (counted when D took it) or {@link #announcePrefillAbandoned};
     * logged when D did not take it.
     */
    private final class PrefillNotice implements UpstreamExchange.Listener {
        private final Instance d;
        /** The P the prefill moved to; null when it was given up. */
        private final Instance p;
        private final StringBuilder answer = new StringBuilder();
        private int status;

        PrefillNotice(Instance d, Instance p) {
            this.d = d;
            this.p = p;
        }

        @Override
        public void onHeaders(UpstreamExchange ex, int code) {
            status = code;
            ex.arm(deadline(ex, config.totalTimeout()), "the body of the answer to the notice on the prefill");
        }

        @Override
        public void onContent(UpstreamExchange ex, ByteBuf content) {
            try {
                if (answer.length() < 300) {
                    answer.append(content.toString(java.nio.charset.StandardCharsets.UTF_8));
                }
            } finally {
                content.release();
            }
        }

        @Override
        public void onEnd(UpstreamExchange ex) {
            if (status / 100 == 2) {
                if (p != null) {
                    proxy.metrics.prefillMovesAnnounced.increment();
                }
                LOG.debug("request {}: {} took the notice that the prefill of transfer {} {}", requestId, d,
                        requestId, what());
            } else {
                String text = answer.toString().strip();
                notTaken(d + " answered " + status + ": " + (text.isEmpty() ? "(empty body)" : text)
                        + (status == 404 ? " (is D a kvconnector engine that loads peer to peer or layer-wise? "
                        + "others need no notice)" : ""));
            }
        }

        @Override
        public void onFailure(UpstreamExchange ex, UpstreamFailure f) {
            notTaken(f.getMessage());
        }

        @Override
        public void onBug(RuntimeException e) {
            notTaken("proxy error: " + e);
        }

        private String what() {
            return p == null ? "was given up" : "moved to " + p;
        }

        private void notTaken(String why) {
            LOG.warn("request {}: decode instance {} was not told that the prefill of transfer {} {}: {}; a "
                    + "peer-to-peer D waits for the P it knows until its layer timeout, then recomputes", requestId, d,
                    requestId, what(), why);
        }
    }

    /** The prefill half of the concurrent flow: D is already waiting for the transfer id, so P only retries. */
    private final class ConcurrentPrefill {
        private final byte[] bytes;
        private final int attempts;
        private int attempt;
        private List<Instance> tried;
        private UpstreamExchange exchange;
        private boolean cancelled;
        boolean succeeded;
        /** The P of the first attempt, which D is told of; null when none was healthy. */
        Instance first;

        ConcurrentPrefill(byte[] bytes) {
            this.bytes = bytes;
            this.attempts = config.onPrefillFailure() == PrefillFailureMode.RETRY ? config.maxPrefillAttempts() : 1;
        }

        void next() {
            if (attempt < attempts && !cancelled) {
                Instance p = proxy.selector(Role.PREFILL).pick(proxy.pool.list(Role.PREFILL), tried, affinity, route);
                if (p != null) {
                    if (attempt == 0) {
                        recordKvDecision(p);
                        first = p;
                    }
                    attempt++;
                    once(p);
                    if (attempt > 1) {
                        proxy.metrics.prefillRetries.increment();
                        announcePrefillMove(p);
                    }
                    return;
                }
            }
            if (!cancelled) {
                proxy.metrics.decodeOnlyFallbacks.increment();
                LOG.warn("request {}: concurrent prefill failed; decode recomputes the prompt", requestId);
                announcePrefillAbandoned();
            }
        }

        private void failed(Instance p) {
            if (tried == null) {
                tried = new ArrayList<>(attempts);
            }
            tried.add(p);
            next();
        }

        private void once(Instance p) {
            ProxyMetrics.InstanceStats stats = proxy.metrics.of(p);
            exchange = send(p, bytes, new Buffered() {
                @Override
                void headers(UpstreamExchange ex, int status) {
                    stats.firstByte.record(ex.elapsedSeconds());
                    ex.arm(deadline(ex, config.totalTimeout()), "response body");
                    if (status < 400) {
                        comparePrediction(p, ex);
                    }
                    discard();
                }

                @Override
                void complete(UpstreamExchange ex, int status, byte[] answer) {
                    stats.latency.record(ex.elapsedSeconds());
                    exchange = null;
                    if (status >= 400) {
                        stats.errors.increment();
                        LOG.warn("request {}: {} answered {} to the concurrent prefill", requestId, p, status);
                        failed(p);
                    } else {
                        succeeded = true;
                    }
                }

                @Override
                public void onFailure(UpstreamExchange ex, UpstreamFailure f) {
                    stats.latency.record(ex.elapsedSeconds());
                    exchange = null;
                    countFailure(stats, f);
                    proxy.onUnreachable(f);
                    LOG.warn("request {}: concurrent prefill failed: {}", requestId, f.getMessage());
                    failed(p);
                }
            });
            exchange.arm(deadline(exchange, config.firstByteTimeout()), "response headers");
        }

        void cancel() {
            cancelled = true;
            if (exchange != null) {
                exchange.cancel();
                proxy.metrics.of(exchange.instance).latency.record(exchange.elapsedSeconds());
                exchange = null;
            }
        }
    }

    // ---- decode ----------------------------------------------------------------------------------

    private void startDecode(ObjectNode kvParams) {
        body.put("request_id", requestId);
        if (kvParams != null) {
            body.set("kv_transfer_params", kvParams);
        }
        decodeBytes = json(body);
        nextDecode();
    }

    private void nextDecode() {
        if (decodeAttempts < config.maxDecodeAttempts()) {
            Instance d = proxy.selector(Role.DECODE).pick(proxy.pool.list(Role.DECODE), decodeTried, affinity, route);
            if (d != null) {
                if (decodeAttempts > 0) {
                    proxy.metrics.decodeRetries.increment();
                }
                decodeAttempts++;
                decodeOnce(d);
                return;
            }
        }
        if (lastDecodeFailure == null) {
            respondError(503, "service_unavailable", "no healthy decode instance (all "
                    + proxy.pool.list(Role.DECODE).size() + " ejected); check /status");
        } else {
            respondError(502, "upstream_error", "decode failed: " + lastDecodeFailure);
        }
    }

    /** The attempt failed before anything reached the client: another instance may take the request. */
    private void decodeFailed(Instance d, String failure) {
        lastDecodeFailure = failure;
        if (decodeTried == null) {
            decodeTried = new ArrayList<>(config.maxDecodeAttempts());
        }
        decodeTried.add(d);
        nextDecode();
    }

    private void decodeOnce(Instance d) {
        ProxyMetrics.InstanceStats stats = proxy.metrics.of(d);
        current = send(d, decodeBytes, new Buffered() {
            /** Streaming to the client: D's bytes pass through as they arrive. */
            private boolean streamed;
            private boolean firstChunk = true;

            @Override
            void headers(UpstreamExchange ex, int status) {
                streamed = stream && status < 400;
                if (kvDecodeOnly && status < 400) {
                    comparePrediction(d, ex);
                }
                if (!streamed) {
                    stats.firstByte.record(ex.elapsedSeconds());
                    ex.arm(deadline(ex, config.totalTimeout()), "response body");
                    // Buffered: the client sees nothing until D's answer is complete, so a failure anywhere can
                    // still move to another instance without a duplicate or half answer.
                    collect(status >= 500 ? ERROR_SNIPPET_BYTES : config.maxResponseBytes());
                } else {
                    ex.arm(deadline(ex, config.firstByteTimeout()), "response body");
                }
            }

            @Override
            public void onContent(UpstreamExchange ex, ByteBuf content) {
                if (!streamed) {
                    super.onContent(ex, content);
                    return;
                }
                if (firstChunk) {
                    startStreaming(ex, stats);
                    firstChunk = false;
                }
                client.chunk(content);
                if (!client.channel.isWritable()) {
                    ex.pauseReading();
                }
            }

            @Override
            void complete(UpstreamExchange ex, int status, byte[] answer) {
                stats.latency.record(ex.elapsedSeconds());
                current = null;
                if (streamed) {
                    if (firstChunk) {
                        startStreaming(ex, stats);
                    }
                    client.endStream();
                    finish();
                } else if (status >= 500) {
                    stats.errors.increment();
                    decodeFailed(d, d + " answered " + status + ": " + snippet(answer));
                } else {
                    respondRaw(status, ex.header("Content-Type"), answer);
                }
            }

            @Override
            public void onFailure(UpstreamExchange ex, UpstreamFailure f) {
                stats.latency.record(ex.elapsedSeconds());
                current = null;
                countFailure(stats, f);
                if (responded) {
                    LOG.warn("request {}: decode stream broke after the first byte: {}", requestId, f.getMessage());
                    // The status line is gone; an SSE error event is the only way left to tell the client.
                    byte[] event = HttpIo.errorBody("decode failed mid-stream: " + f.getMessage(), "upstream_error",
                            502);
                    client.chunk(Unpooled.wrappedBuffer(HttpIo.utf8("data: "), event, HttpIo.utf8("\n\n")));
                    client.endStream();
                    finish();
                    return;
                }
                proxy.onUnreachable(f);
                decodeFailed(d, f.getMessage());
            }
        });
        current.arm(deadline(current, config.firstByteTimeout()), "response headers");
    }

    private void startStreaming(UpstreamExchange ex, ProxyMetrics.InstanceStats stats) {
        stats.firstByte.record(ex.elapsedSeconds());
        ex.arm(deadline(ex, config.totalTimeout()), "response body");
        String type = ex.header("Content-Type");
        client.startStream(ex.status(), type == null ? "text/event-stream" : type);
        responded = true;
        proxy.metrics.response(ex.status());
        proxy.metrics.clientFirstByte.record((System.nanoTime() - startNanos) / 1e9);
    }

    // ---- helpers ---------------------------------------------------------------------------------

    /**
     * A listener that reads a whole answer into an array (at most a given size), or drops it, as
     * {@link #headers} decides; subclasses may take the body themselves by overriding {@link #onContent}.
     */
    private abstract class Buffered implements UpstreamExchange.Listener {
        private int status;
        private long max = -1;
        private byte[] bytes;
        private int size;

        abstract void headers(UpstreamExchange ex, int status);

        abstract void complete(UpstreamExchange ex, int status, byte[] answer);

        void collect(long maxBytes) {
            max = maxBytes;
            bytes = new byte[1024];
        }

        void discard() {
            max = -1;
        }

        @Override
        public final void onHeaders(UpstreamExchange ex, int code) {
            status = code;
            headers(ex, code);
        }

        @Override
        public void onContent(UpstreamExchange ex, ByteBuf content) {
            try {
                if (max < 0) {
                    return;
                }
                int n = content.readableBytes();
                if (size + (long) n > max) {
                    ex.cancel();
                    onFailure(ex, new UpstreamFailure(ex.instance, "answer larger than " + max + " bytes", false));
                    return;
                }
                if (size + n > bytes.length) {
                    bytes = Arrays.copyOf(bytes, (int) Math.min(max, Math.max(bytes.length * 2L, size + n)));
                }
                content.readBytes(bytes, size, n);
                size += n;
            } finally {
                content.release();
            }
        }

        @Override
        public final void onEnd(UpstreamExchange ex) {
            complete(ex, status, bytes == null ? new byte[0] : Arrays.copyOf(bytes, size));
        }

        @Override
        public void onBug(RuntimeException e) {
            current = null;
            if (!responded) {
                respondError(500, "internal_error", "proxy error: " + e);
            } else {
                client.channel.close();
                finish();
            }
        }
    }

    private UpstreamExchange send(Instance i, byte[] bytes, UpstreamExchange.Listener listener) {
        proxy.metrics.of(i).requests.increment();
        return UpstreamExchange.send(proxy.upstream, loop, i, client.path, requestId,
                client.headers.get("Authorization"), bytes, listener);
    }

    private static void countFailure(ProxyMetrics.InstanceStats stats, UpstreamFailure f) {
        stats.errors.increment();
        if (f.timeout) {
            stats.timeouts.increment();
        }
    }

    private static long deadline(UpstreamExchange ex, java.time.Duration d) {
        return ex.startNanos + d.toNanos();
    }

    private static byte[] json(ObjectNode node) {
        try {
            return HttpIo.JSON.writeValueAsBytes(node);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot serialise a request body", e);
        }
    }

    private static String snippet(byte[] body) {
        String s = new String(body, 0, Math.min(body.length, 300), java.nio.charset.StandardCharsets.UTF_8).strip();
        return s.isEmpty() ? "(empty body)" : s;
    }

    private void respondRaw(int status, String contentType, byte[] answer) {
        if (clientGone) {
            return;
        }
        responded = true;
        proxy.metrics.response(status);
        proxy.metrics.clientFirstByte.record((System.nanoTime() - startNanos) / 1e9);
        client.send(status, contentType == null ? "application/json" : contentType, answer);
        finish();
    }

    private void respondError(int status, String type, String message) {
        LOG.warn("request {}: {} {}", requestId, status, message);
        respondRaw(status, "application/json", HttpIo.errorBody(message, type, status));
    }

    /** The client has its answer, or is gone: an unfinished concurrent prefill has nobody left to serve. */
    private void finish() {
        if (finished) {
            return;
        }
        finished = true;
        client.call = null;
        if (concurrentPrefill != null && (clientGone || !concurrentPrefill.succeeded)) {
            concurrentPrefill.cancel();
        }
    }
}
