package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The XpYd global proxy: an OpenAI-compatible HTTP front over X prefill and Y decode instances.
 *
 * <pre>{@code
 * try (XpydProxy proxy = new XpydProxy(ProxyConfig.builder("meta-llama/Llama-3.1-8B-Instruct")
 *         .prefill("10.0.0.5:8100").decode("10.0.0.6:8200").port(8000).flow(ProxyFlow.V1).build()).start()) {
 *     proxy.awaitStop();
 * }
 * }</pre>
 *
 * <p>Endpoints: {@code POST /v1/completions}, {@code POST /v1/chat/completions} (streamed or not),
 * {@code GET /v1/models}, {@code GET /status}, {@code GET /health}, {@code GET /metrics} (Prometheus), and
 * {@code POST /instances/add}, {@code POST /instances/remove} (need {@code X-API-Key}).
 *
 * <p>Server choice, by measurement (a throwaway main, run four times on the 2-core build machine while other
 * builds ran, load average 11-18, so only the comparison means anything): an HttpClient with 32 virtual-thread
 * callers x 300 POSTs against a handler that answers 1 KiB of JSON, or 20 SSE chunks each flushed.
 * <ul>
 *   <li>JDK {@code HttpServer}, virtual threads, TCP_NODELAY: JSON 700-5,800 req/s (p50 5-24 ms),
 *       SSE 1,150-3,000 req/s (p50 9-18 ms).</li>
 *   <li>Jetty 12.1.13 core handler, virtual threads: JSON 650-4,400 req/s (p50 6-19 ms),
 *       SSE 530-4,200 req/s (p50 7-40 ms).</li>
 *   <li>JDK {@code HttpServer} without TCP_NODELAY: SSE 480-710 req/s at p50 44-56 ms: every flushed chunk
 *       waits out Nagle against the client's delayed ACK.</li>
 * </ul>
 * So: the JDK server, with {@code sun.net.httpserver.nodelay} set before it loads. In each of the three
 * rounds run with TCP_NODELAY it matched or beat Jetty run in the same round, and it adds no dependency. What it lacks: it cannot notice a client that leaves
 * while the proxy waits on a silent upstream; the next write notices, and the first-byte and total timeouts
 * bound every upstream wait.
 *
 * <p>Its executor: a virtual thread per exchange. In the proxy load test ({@code benchmarks/.../ProxyLoadTest},
 * 200 clients, run twice alternating, load average 10-15) a cached pool of platform threads cost the proxy
 * 1,050-1,300 us of CPU per request against 690-720 us with virtual threads; at one client neither was
 * consistently ahead.
 */
public final class XpydProxy implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(XpydProxy.class);

    static {
        // Read once when the JDK server's config class loads: must precede the first HttpServer in the JVM.
        setIfUnset("sun.net.httpserver.nodelay", "true");
        // The JDK server closes idle keep-alive connections beyond 200; a client about to reuse one then gets a
        // connection that answers nothing. A proxy in front of hundreds of clients keeps more.
        setIfUnset("sun.net.httpserver.maxIdleConnections", "4096");
        // vLLM's server (uvicorn) drops idle keep-alive connections after 5 s, the JDK client (health probes, model
        // checks) would reuse them for 30 s. Stop reusing them before the instance drops them. Read once, when the
        // first HttpClient is built. Completion requests go through UpstreamClient, which keeps them 4 s.
        setIfUnset("jdk.httpclient.keepalive.timeout", "4");
    }

    private static void setIfUnset(String property, String value) {
        if (System.getProperty(property) == null) {
            System.setProperty(property, value);
        }
    }

    final ProxyConfig config;
    final InstancePool pool;
    final ProxyMetrics metrics = new ProxyMetrics();
    /** Health probes and model checks: rare GETs. */
    final HttpClient client;
    /** Completion requests to the instances. */
    final UpstreamClient upstream;
    private final InstanceSelector prefillSelector;
    private final InstanceSelector decodeSelector;
    private final byte[] adminKeyDigest;
    private final AtomicLong requestCounter = new AtomicLong();
    private final String idPrefix = "xpyd-" + Long.toHexString(System.nanoTime() & 0xffffffL) + "-";
    private final ExecutorService serverThreads = Executors.newVirtualThreadPerTaskExecutor();
    private final ExecutorService clientThreads = Executors.newVirtualThreadPerTaskExecutor();
    private HttpServer server;
    private HealthChecker health;
    private final java.util.concurrent.CountDownLatch stopped = new java.util.concurrent.CountDownLatch(1);

    /** Creates a stopped proxy; {@link #start()} checks the instances and binds the port. */
    public XpydProxy(ProxyConfig config) {
        this.config = config;
        this.pool = new InstancePool(config.prefill(), config.decode());
        this.prefillSelector = InstanceSelector.of(config.policy());
        this.decodeSelector = InstanceSelector.of(config.policy());
        this.adminKeyDigest = config.adminApiKey() == null ? null : sha256(config.adminApiKey());
        this.client = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(config.connectTimeout())
                .executor(clientThreads)
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
        this.upstream = new UpstreamClient(config, metrics.staleConnectionRetries);
    }

    /**
     * Checks every instance's model (per {@link ProxyConfig#startupCheck()}), binds the port, starts health
     * probing and serving.
     *
     * @throws KVException {@link ErrorCode#INVALID_CONFIG} when an instance does not serve the model and
     *                     the check is {@link StartupCheck#FAIL}
     * @throws IOException when the port cannot be bound
     */
    public synchronized XpydProxy start() throws IOException {
        if (server != null) {
            return this;
        }
        if (config.startupCheck() != StartupCheck.OFF) {
            checkModels();
        }
        HttpServer s = HttpServer.create(new InetSocketAddress(config.bindHost(), config.port()), 1024);
        s.setExecutor(serverThreads);
        s.createContext("/", this::dispatch);
        s.start();
        server = s;
        if (!config.healthInterval().isZero()) {
            health = new HealthChecker(config, pool, client);
        }
        LOG.info("XpYd proxy listening on {}:{} for model {}: {} prefill {}, {} decode {}, flow {}, policy {}",
                config.bindHost(), port(), config.model(), config.prefill().size(), config.prefill(),
                config.decode().size(), config.decode(), config.flow(), config.policy());
        return this;
    }

    private void checkModels() {
        for (Instance i : pool.all()) {
            String problem;
            try {
                problem = ModelCheck.verify(client, i.address, config.model(), config.healthTimeout());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw KVException.of(ErrorCode.INTERNAL, "interrupted while checking " + i).build();
            }
            if (problem == null) {
                continue;
            }
            if (config.startupCheck() == StartupCheck.FAIL) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, i + ": " + problem)
                        .operation("proxy start")
                        .hint("start the instance with the model, fix --prefill/--decode, or pass"
                                + " --startup-check warn to start anyway")
                        .build();
            }
            LOG.warn("{}: {} (starting anyway: --startup-check warn)", i, problem);
        }
    }

    /** The bound TCP port; valid after {@link #start()}, the real one when the config asked for 0. */
    public int port() {
        HttpServer s = server;
        if (s == null) {
            throw new IllegalStateException("proxy not started");
        }
        return s.getAddress().getPort();
    }

    /** {@code http://host:port} of the running proxy (127.0.0.1 when bound to all addresses). */
    public URI uri() {
        String host = config.bindHost().equals("0.0.0.0") ? "127.0.0.1" : config.bindHost();
        return URI.create("http://" + host + ":" + port());
    }

    /** Blocks until {@link #stop()} is called. */
    public void awaitStop() throws InterruptedException {
        stopped.await();
    }

    /** Stops serving, probing and every upstream request in flight; idempotent. */
    public synchronized void stop() {
        if (health != null) {
            health.close();
            health = null;
        }
        if (server != null) {
            server.stop(0);
            server = null;
        }
        client.shutdownNow();
        upstream.close();
        clientThreads.shutdownNow();
        serverThreads.shutdownNow();
        stopped.countDown();
    }

    /** Same as {@link #stop()}. */
    @Override
    public void close() {
        stop();
    }

    /**
     * A request could not connect to an instance. While probing runs, the instance is ejected at once so
     * the next requests skip it (a blackholed host costs a connect timeout each), and probes readmit it.
     */
    void onUnreachable(UpstreamFailure f) {
        if (f.unreachable && !config.healthInterval().isZero() && f.instance.eject()) {
            LOG.warn("{} ejected: a request could not connect ({}); health probes readmit it", f.instance,
                    f.getMessage());
        }
    }

    InstanceSelector selector(Role role) {
        return role == Role.PREFILL ? prefillSelector : decodeSelector;
    }

    // ---- dispatch --------------------------------------------------------------------------------

    private void dispatch(HttpExchange ex) {
        long start = System.nanoTime();
        String path = ex.getRequestURI().getPath();
        try (ex) {
            switch (path) {
                case "/v1/completions", "/v1/chat/completions" -> inference(ex, path, start);
                case "/v1/models" -> get(ex, this::models);
                case "/status" -> get(ex, this::status);
                case "/health" -> get(ex, this::health);
                case "/metrics" -> get(ex, e -> HttpIo.send(e, 200, "text/plain; version=0.0.4; charset=utf-8",
                        metrics.render(pool).getBytes(StandardCharsets.UTF_8)));
                case "/instances/add" -> admin(ex, true);
                case "/instances/remove" -> admin(ex, false);
                default -> reply(ex, 404, "not_found", "no endpoint " + path + "; see /v1/completions,"
                        + " /v1/chat/completions, /v1/models, /status, /health, /metrics");
            }
        } catch (IOException e) {
            LOG.debug("client connection for {} failed: {}", path, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            LOG.error("unexpected error serving {}", path, e);
            try {
                reply(ex, 500, "internal_error", "proxy error: " + e);
            } catch (IOException | RuntimeException ignored) {
                // The headers may already be out; the connection closes either way.
            }
        }
    }

    private interface Handler {
        void handle(HttpExchange ex) throws IOException;
    }

    private void get(HttpExchange ex, Handler h) throws IOException {
        if (!"GET".equals(ex.getRequestMethod())) {
            ex.getResponseHeaders().set("Allow", "GET");
            reply(ex, 405, "invalid_request_error", ex.getRequestMethod() + " not allowed; use GET");
            return;
        }
        h.handle(ex);
        metrics.response(ex.getResponseCode());
    }

    private void reply(HttpExchange ex, int status, String type, String message) throws IOException {
        metrics.response(status);
        HttpIo.sendError(ex, status, type, message);
    }

    /** Validates the request and reads it as a JSON object; answers the client and returns null otherwise. */
    private ObjectNode readJsonObject(HttpExchange ex) throws IOException {
        if (!"POST".equals(ex.getRequestMethod())) {
            ex.getResponseHeaders().set("Allow", "POST");
            reply(ex, 405, "invalid_request_error", ex.getRequestMethod() + " not allowed; use POST");
            return null;
        }
        String contentType = ex.getRequestHeaders().getFirst("Content-Type");
        if (!HttpIo.isJson(contentType)) {
            reply(ex, 415, "invalid_request_error", "Content-Type must be application/json, was "
                    + (contentType == null ? "missing" : "'" + contentType + "'"));
            return null;
        }
        String declared = ex.getRequestHeaders().getFirst("Content-Length");
        byte[] raw = null;
        boolean tooLarge;
        try {
            tooLarge = declared != null && Long.parseLong(declared.strip()) > config.maxRequestBytes();
        } catch (NumberFormatException e) {
            reply(ex, 400, "invalid_request_error", "Content-Length '" + declared + "' is not a number");
            return null;
        }
        if (!tooLarge) {
            raw = HttpIo.readLimited(ex.getRequestBody(), config.maxRequestBytes());
            tooLarge = raw == null;
        }
        if (tooLarge) {
            // The unread rest of the body would desynchronise the connection: close it after answering.
            ex.getResponseHeaders().set("Connection", "close");
            reply(ex, 413, "invalid_request_error", "request body exceeds the limit of " + config.maxRequestBytes()
                    + " bytes (--max-request-bytes)");
            return null;
        }
        JsonNode node;
        try {
            node = HttpIo.JSON.readTree(raw);
        } catch (IOException e) {
            node = null;
        }
        if (node == null || node.isMissingNode()) {
            reply(ex, 415, "invalid_request_error", "request body is not JSON");
            return null;
        }
        if (!(node instanceof ObjectNode obj)) {
            reply(ex, 400, "invalid_request_error", "request body must be a JSON object, was " + node.getNodeType());
            return null;
        }
        return obj;
    }

    private void inference(HttpExchange ex, String path, long start) throws IOException, InterruptedException {
        ObjectNode body = readJsonObject(ex);
        if (body == null) {
            return;
        }
        String requestId = idPrefix + requestCounter.incrementAndGet();
        ex.getResponseHeaders().set("X-Request-Id", requestId);
        new InferenceCall(this, ex, path, body, requestId, start).run();
    }

    // ---- informational endpoints -----------------------------------------------------------------

    private void models(HttpExchange ex) throws IOException {
        ObjectNode root = HttpIo.JSON.createObjectNode();
        root.put("object", "list");
        ObjectNode m = root.putArray("data").addObject();
        m.put("id", config.model());
        m.put("object", "model");
        m.put("owned_by", "kvconnector-xpyd-proxy");
        HttpIo.sendJson(ex, 200, root);
    }

    private void status(HttpExchange ex) throws IOException {
        ObjectNode root = HttpIo.JSON.createObjectNode();
        root.put("model", config.model());
        root.put("flow", config.flow().name().toLowerCase(java.util.Locale.ROOT));
        root.put("policy", config.policy().name().toLowerCase(java.util.Locale.ROOT).replace('_', '-'));
        for (Role role : Role.values()) {
            List<Instance> list = pool.list(role);
            root.put(role.label() + "_node_count", list.size());
            ArrayNode names = root.putArray(role.label() + "_nodes");
            ArrayNode details = root.putArray(role.label() + "_instances");
            for (Instance i : list) {
                names.add(i.name);
                ObjectNode d = details.addObject();
                d.put("instance", i.name);
                d.put("healthy", i.healthy());
                d.put("outstanding", i.outstanding.get());
            }
        }
        HttpIo.sendJson(ex, 200, root);
    }

    private void health(HttpExchange ex) throws IOException {
        int healthyDecode = healthyCount(Role.DECODE);
        int healthyPrefill = healthyCount(Role.PREFILL);
        if (healthyDecode == 0) {
            HttpIo.sendError(ex, 503, "service_unavailable", "no healthy decode instance");
            return;
        }
        ObjectNode root = HttpIo.JSON.createObjectNode();
        root.put("status", "ok");
        root.put("healthy_prefill", healthyPrefill);
        root.put("healthy_decode", healthyDecode);
        HttpIo.sendJson(ex, 200, root);
    }

    private int healthyCount(Role role) {
        int n = 0;
        for (Instance i : pool.list(role)) {
            if (i.healthy()) {
                n++;
            }
        }
        return n;
    }

    // ---- admin -----------------------------------------------------------------------------------

    private void admin(HttpExchange ex, boolean add) throws IOException, InterruptedException {
        if (adminKeyDigest == null) {
            reply(ex, 500, "server_error", "admin API disabled: the proxy has no admin key (set ADMIN_API_KEY"
                    + " or --admin-key-file)");
            return;
        }
        String given = ex.getRequestHeaders().getFirst("X-API-Key");
        // Digests of equal length make the comparison constant-time in the key's length as well as content.
        if (given == null || !MessageDigest.isEqual(sha256(given), adminKeyDigest)) {
            reply(ex, 403, "permission_error", "missing or wrong X-API-Key");
            return;
        }
        ObjectNode body = readJsonObject(ex);
        if (body == null) {
            return;
        }
        String typeText = body.path("type").asText(null);
        Role role = Role.parse(typeText);
        if (role == null) {
            reply(ex, 400, "invalid_request_error", "\"type\" must be \"prefill\" or \"decode\", was " + typeText);
            return;
        }
        HostPort address;
        try {
            address = HostPort.parse(body.path("instance").asText(null));
        } catch (IllegalArgumentException e) {
            reply(ex, 400, "invalid_request_error", "\"instance\": " + e.getMessage());
            return;
        }
        if (!add) {
            Instance removed = pool.remove(role, address);
            if (removed == null) {
                reply(ex, 404, "not_found", address + " is not a " + role.label() + " instance; see /status");
                return;
            }
            LOG.info("admin removed {}", removed);
            adminOk(ex, "removed " + address + " from " + role.label() + " instances", role, address);
            return;
        }
        if (pool.contains(role, address)) {
            reply(ex, 400, "invalid_request_error", address + " is already a " + role.label() + " instance");
            return;
        }
        String problem = ModelCheck.verify(client, address, config.model(), config.healthTimeout());
        if (problem != null) {
            reply(ex, 400, "invalid_request_error", "cannot add " + address + ": " + problem);
            return;
        }
        Instance added = pool.add(role, address);
        if (added == null) {
            reply(ex, 400, "invalid_request_error", address + " is already a " + role.label() + " instance");
            return;
        }
        LOG.info("admin added {}", added);
        adminOk(ex, "added " + address + " to " + role.label() + " instances", role, address);
    }

    private void adminOk(HttpExchange ex, String message, Role role, HostPort address) throws IOException {
        ObjectNode root = HttpIo.JSON.createObjectNode();
        root.put("message", message);
        root.put("type", role.label());
        root.put("instance", address.toString());
        root.put(role.label() + "_node_count", pool.list(role).size());
        metrics.response(200);
        HttpIo.sendJson(ex, 200, root);
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every JDK", e);
        }
    }
}
