package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.apache.hc.client5.http.classic.methods.HttpPost;
import org.apache.hc.core5.http.ContentType;
import org.apache.hc.core5.http.io.entity.ByteArrayEntity;

import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * One client completion request driven through P and D, on the virtual thread that serves the client.
 * Exactly one answer goes to the client: either D's (passed through), a 4xx of P or D (the client's own
 * error, passed through), or an OpenAI-style error naming the instance and cause.
 */
final class InferenceCall {
    private static final Logger LOG = LoggerFactory.getLogger(InferenceCall.class);
    /** Sent to the instances as {@code Content-Type: application/json}, without a charset parameter. */
    private static final ContentType JSON = ContentType.create("application/json");
    private static final int ERROR_SNIPPET_BYTES = 64 << 10;
    /** One read of a streamed answer: several SSE events at a time when D is faster than the client. */
    private static final int STREAM_BUFFER_BYTES = 4 << 10;

    private final XpydProxy proxy;
    private final ProxyConfig config;
    private final HttpExchange client;
    private final String path;
    private final ObjectNode body;
    private final String requestId;
    private final boolean stream;
    private final long affinity;
    private final long startNanos;
    private volatile boolean clientGone;
    private boolean responded;

    InferenceCall(XpydProxy proxy, HttpExchange client, String path, ObjectNode body, String requestId,
                  long startNanos) {
        this.proxy = proxy;
        this.config = proxy.config;
        this.client = client;
        this.path = path;
        this.body = body;
        this.requestId = requestId;
        this.stream = body.path("stream").asBoolean(false);
        this.affinity = config.policy() == Policy.PREFIX_AFFINITY
                ? PromptAffinity.hash(body, config.prefixAffinityChars()) : 0L;
        this.startNanos = startNanos;
    }

    void run() throws IOException, InterruptedException {
        switch (config.flow()) {
            case V0, V1 -> {
                ObjectNode kvParams = prefillThenDecideDecode();
                if (responded) {
                    return;
                }
                body.put("request_id", requestId);
                if (kvParams != null) {
                    body.set("kv_transfer_params", kvParams);
                }
                decode();
            }
            case CONCURRENT -> runConcurrent();
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

    /**
     * Runs the prefill with the configured retries. Returns P's {@code kv_transfer_params} (V1), null when D
     * goes on without it (V0, or decode-only after a failure); sets {@link #responded} when the client
     * already got its answer (P's 4xx, or every prefill failed).
     */
    private ObjectNode prefillThenDecideDecode() throws IOException, InterruptedException {
        byte[] bytes = HttpIo.JSON.writeValueAsBytes(prefillBody());
        List<Instance> tried = null;
        String lastFailure = null;
        for (int attempt = 0; attempt < config.maxPrefillAttempts(); attempt++) {
            Instance p = proxy.selector(Role.PREFILL).pick(proxy.pool.list(Role.PREFILL), tried, affinity);
            if (p == null) {
                break;
            }
            if (attempt > 0) {
                proxy.metrics.prefillRetries.increment();
            }
            PrefillAttempt result = prefillOnce(p, bytes);
            if (result.kvParams != null || result.done) {
                return result.kvParams;
            }
            if (responded) {
                return null;
            }
            lastFailure = result.failure;
            if (config.onPrefillFailure() == PrefillFailureMode.DECODE_ONLY) {
                break;
            }
            if (tried == null) {
                tried = new ArrayList<>(config.maxPrefillAttempts());
            }
            tried.add(p);
        }
        if (config.onPrefillFailure() == PrefillFailureMode.DECODE_ONLY) {
            proxy.metrics.decodeOnlyFallbacks.increment();
            LOG.warn("request {}: prefill failed ({}); decode computes the prompt alone", requestId,
                    lastFailure == null ? "no healthy prefill instance" : lastFailure);
            return null;
        }
        if (lastFailure == null) {
            respondError(503, "service_unavailable", "no healthy prefill instance (all "
                    + proxy.pool.list(Role.PREFILL).size() + " ejected or none configured); check /status");
        } else {
            respondError(502, "upstream_error", "prefill failed: " + lastFailure);
        }
        return null;
    }

    private record PrefillAttempt(ObjectNode kvParams, boolean done, String failure) {
    }

    private PrefillAttempt prefillOnce(Instance p, byte[] bytes) throws IOException, InterruptedException {
        UpstreamExchange ex = send(p, bytes);
        ProxyMetrics.InstanceStats stats = proxy.metrics.of(p);
        try {
            int status = ex.awaitHeaders(deadline(ex, config.firstByteTimeout()));
            stats.firstByte.record(ex.elapsedSeconds());
            long total = deadline(ex, config.totalTimeout());
            if (status >= 500) {
                String snippet = snippet(ex.readAll(total, ERROR_SNIPPET_BYTES));
                stats.errors.increment();
                return new PrefillAttempt(null, false, p + " answered " + status + ": " + snippet);
            }
            if (status >= 400) {
                // The client's request is at fault (a prompt too long, an unknown model): D would say the same.
                byte[] answer = ex.readAll(total, config.maxResponseBytes());
                respondRaw(status, ex.header("Content-Type"), answer);
                return new PrefillAttempt(null, true, null);
            }
            if (config.flow() == ProxyFlow.V0) {
                ex.discardBody(total);
                return new PrefillAttempt(null, true, null);
            }
            byte[] answer = ex.readAll(total, config.maxResponseBytes());
            if (config.flow() == ProxyFlow.CONCURRENT) {
                return new PrefillAttempt(null, true, null);
            }
            JsonNode kv = parseKvParams(answer);
            if (kv instanceof ObjectNode obj) {
                return new PrefillAttempt(obj, true, null);
            }
            stats.errors.increment();
            return new PrefillAttempt(null, false, p + " answered without a kv_transfer_params object: is it"
                    + " started with --kv-transfer-config and kv_role kv_producer (or kv_both)?");
        } catch (UpstreamFailure f) {
            stats.errors.increment();
            if (f.timeout) {
                stats.timeouts.increment();
            }
            proxy.onUnreachable(f);
            return new PrefillAttempt(null, false, f.getMessage());
        } finally {
            stats.latency.record(ex.elapsedSeconds());
            ex.release();
        }
    }

    private static JsonNode parseKvParams(byte[] answer) {
        try {
            return HttpIo.JSON.readTree(answer).get("kv_transfer_params");
        } catch (IOException e) {
            return null;
        }
    }

    // ---- concurrent ------------------------------------------------------------------------------

    private void runConcurrent() throws IOException, InterruptedException {
        byte[] prefillBytes = HttpIo.JSON.writeValueAsBytes(prefillBody());
        body.put("request_id", requestId);
        ObjectNode kv = body.putObject("kv_transfer_params");
        kv.put("transfer_id", requestId);
        kv.put("do_remote_decode", false);
        kv.put("do_remote_prefill", true);
        ConcurrentPrefill prefill = new ConcurrentPrefill(prefillBytes);
        Thread.ofVirtual().name("xpyd-prefill-" + requestId).start(prefill);
        try {
            decode();
        } finally {
            // Once D is done or the client is gone, an unfinished prefill has nobody left to serve.
            if (clientGone || !prefill.succeeded) {
                prefill.cancel();
            }
        }
    }

    /** The prefill half of the concurrent flow: D is already waiting for the transfer id, so P only retries. */
    private final class ConcurrentPrefill implements Runnable {
        private final byte[] bytes;
        private volatile UpstreamExchange current;
        private volatile boolean cancelled;
        volatile boolean succeeded;

        ConcurrentPrefill(byte[] bytes) {
            this.bytes = bytes;
        }

        @Override
        public void run() {
            List<Instance> tried = null;
            int attempts = config.onPrefillFailure() == PrefillFailureMode.RETRY ? config.maxPrefillAttempts() : 1;
            for (int attempt = 0; attempt < attempts && !cancelled; attempt++) {
                Instance p = proxy.selector(Role.PREFILL).pick(proxy.pool.list(Role.PREFILL), tried, affinity);
                if (p == null) {
                    break;
                }
                if (attempt > 0) {
                    proxy.metrics.prefillRetries.increment();
                }
                if (attemptOnce(p)) {
                    succeeded = true;
                    return;
                }
                if (tried == null) {
                    tried = new ArrayList<>(attempts);
                }
                tried.add(p);
            }
            if (!cancelled) {
                proxy.metrics.decodeOnlyFallbacks.increment();
                LOG.warn("request {}: concurrent prefill failed; decode recomputes the prompt", requestId);
            }
        }

        private boolean attemptOnce(Instance p) {
            UpstreamExchange ex = send(p, bytes);
            current = ex;
            ProxyMetrics.InstanceStats stats = proxy.metrics.of(p);
            try {
                if (cancelled) {
                    ex.cancel();
                    return false;
                }
                int status = ex.awaitHeaders(deadline(ex, config.firstByteTimeout()));
                stats.firstByte.record(ex.elapsedSeconds());
                ex.discardBody(deadline(ex, config.totalTimeout()));
                if (status >= 400) {
                    stats.errors.increment();
                    LOG.warn("request {}: {} answered {} to the concurrent prefill", requestId, p, status);
                    return false;
                }
                return true;
            } catch (UpstreamFailure f) {
                if (cancelled) {
                    return false;
                }
                stats.errors.increment();
                if (f.timeout) {
                    stats.timeouts.increment();
                }
                proxy.onUnreachable(f);
                LOG.warn("request {}: concurrent prefill failed: {}", requestId, f.getMessage());
                return false;
            } catch (InterruptedException e) {
                ex.cancel();
                return false;
            } finally {
                stats.latency.record(ex.elapsedSeconds());
                ex.release();
            }
        }

        void cancel() {
            cancelled = true;
            UpstreamExchange ex = current;
            if (ex != null) {
                ex.cancel();
            }
        }
    }

    // ---- decode ----------------------------------------------------------------------------------

    private void decode() throws IOException, InterruptedException {
        byte[] bytes = HttpIo.JSON.writeValueAsBytes(body);
        List<Instance> tried = null;
        String lastFailure = null;
        for (int attempt = 0; attempt < config.maxDecodeAttempts(); attempt++) {
            Instance d = proxy.selector(Role.DECODE).pick(proxy.pool.list(Role.DECODE), tried, affinity);
            if (d == null) {
                break;
            }
            if (attempt > 0) {
                proxy.metrics.decodeRetries.increment();
            }
            String failure = decodeOnce(d, bytes);
            if (failure == null) {
                return;
            }
            lastFailure = failure;
            if (tried == null) {
                tried = new ArrayList<>(config.maxDecodeAttempts());
            }
            tried.add(d);
        }
        if (lastFailure == null) {
            respondError(503, "service_unavailable", "no healthy decode instance (all "
                    + proxy.pool.list(Role.DECODE).size() + " ejected); check /status");
        } else {
            respondError(502, "upstream_error", "decode failed: " + lastFailure);
        }
    }

    /**
     * One decode attempt. Returns null when the client got its answer (or went away), or the failure
     * when nothing reached the client yet, so another instance may take the request.
     */
    private String decodeOnce(Instance d, byte[] bytes) throws IOException, InterruptedException {
        UpstreamExchange ex = send(d, bytes);
        ProxyMetrics.InstanceStats stats = proxy.metrics.of(d);
        try {
            long firstByte = deadline(ex, config.firstByteTimeout());
            long total = deadline(ex, config.totalTimeout());
            int status = ex.awaitHeaders(firstByte);
            boolean streamed = stream && status < 400;
            if (!streamed) {
                stats.firstByte.record(ex.elapsedSeconds());
            }
            if (status >= 500) {
                String snippet = snippet(ex.readAll(total, ERROR_SNIPPET_BYTES));
                stats.errors.increment();
                return d + " answered " + status + ": " + snippet;
            }
            if (!streamed) {
                // Buffered: the client sees nothing until D's answer is complete, so a failure anywhere can
                // still move to another instance without a duplicate or half answer.
                byte[] answer = ex.readAll(total, config.maxResponseBytes());
                ex.release();
                respondRaw(status, ex.header("Content-Type"), answer);
                return null;
            }
            byte[] buf = new byte[STREAM_BUFFER_BYTES];
            int n = ex.read(buf, firstByte);
            stats.firstByte.record(ex.elapsedSeconds());
            streamToClient(ex, status, buf, n, total);
            return null;
        } catch (UpstreamFailure f) {
            stats.errors.increment();
            if (f.timeout) {
                stats.timeouts.increment();
            }
            proxy.onUnreachable(f);
            if (responded) {
                return null;
            }
            return f.getMessage();
        } finally {
            stats.latency.record(ex.elapsedSeconds());
            ex.release();
        }
    }

    /** Passes D's SSE bytes through, flushing each read as it arrives; {@code n} bytes of {@code buf} came first. */
    private void streamToClient(UpstreamExchange ex, int status, byte[] buf, int n, long totalDeadline)
            throws InterruptedException {
        String type = ex.header("Content-Type");
        client.getResponseHeaders().set("Content-Type", type == null ? "text/event-stream" : type);
        client.getResponseHeaders().set("Cache-Control", "no-cache");
        try {
            client.sendResponseHeaders(status, 0);
            responded = true;
            proxy.metrics.response(status);
            proxy.metrics.clientFirstByte.record((System.nanoTime() - startNanos) / 1e9);
            OutputStream out = client.getResponseBody();
            while (n >= 0) {
                out.write(buf, 0, n);
                out.flush();
                try {
                    n = ex.read(buf, totalDeadline);
                } catch (UpstreamFailure f) {
                    ProxyMetrics.InstanceStats stats = proxy.metrics.of(ex.instance);
                    stats.errors.increment();
                    if (f.timeout) {
                        stats.timeouts.increment();
                    }
                    LOG.warn("request {}: decode stream broke after the first byte: {}", requestId, f.getMessage());
                    // The status line is gone; an SSE error event is the only way left to tell the client.
                    out.write(HttpIo.utf8("data: "));
                    out.write(HttpIo.errorBody("decode failed mid-stream: " + f.getMessage(), "upstream_error", 502));
                    out.write(HttpIo.utf8("\n\n"));
                    out.flush();
                    return;
                }
            }
            ex.release();
            out.close();
        } catch (IOException clientWriteFailed) {
            clientGone = true;
            proxy.metrics.clientDisconnects.increment();
            ex.cancel();
            LOG.debug("request {}: client went away; cancelled {}", requestId, ex.instance);
        }
    }

    // ---- helpers ---------------------------------------------------------------------------------

    private UpstreamExchange send(Instance i, byte[] bytes) {
        HttpPost post = new HttpPost(i.uri(path));
        post.setHeader("X-Request-Id", requestId);
        post.setEntity(new ByteArrayEntity(bytes, JSON));
        String auth = client.getRequestHeaders().getFirst("Authorization");
        if (auth != null) {
            post.setHeader("Authorization", auth);
        }
        proxy.metrics.of(i).requests.increment();
        return UpstreamExchange.send(proxy.upstream, i, post);
    }

    private static long deadline(UpstreamExchange ex, java.time.Duration d) {
        return ex.startNanos + d.toNanos();
    }

    private static String snippet(byte[] body) {
        String s = new String(body, 0, Math.min(body.length, 300), java.nio.charset.StandardCharsets.UTF_8).strip();
        return s.isEmpty() ? "(empty body)" : s;
    }

    private void respondRaw(int status, String contentType, byte[] answer) throws IOException {
        responded = true;
        proxy.metrics.response(status);
        proxy.metrics.clientFirstByte.record((System.nanoTime() - startNanos) / 1e9);
        HttpIo.send(client, status, contentType == null ? "application/json" : contentType, answer);
    }

    private void respondError(int status, String type, String message) throws IOException {
        LOG.warn("request {}: {} {}", requestId, status, message);
        respondRaw(status, "application/json", HttpIo.errorBody(message, type, status));
    }
}
