package dev.kvconnector.proxy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Validated settings of one {@link XpydProxy}. Build with {@link #builder(String)}; {@link Builder#build()}
 * checks every value once, so the proxy never re-validates on the request path.
 *
 * @param model                 the model every instance must serve (checked on {@code /v1/models})
 * @param prefill               prefill instances as {@code host:port}
 * @param decode                decode instances as {@code host:port}; at least one
 * @param bindHost              address the proxy listens on
 * @param port                  TCP port the proxy listens on; 0 picks a free port (see {@link XpydProxy#port()})
 * @param flow                  how P and D are driven
 * @param policy                how an instance is picked within a role
 * @param onPrefillFailure      retry another P, or let D compute alone
 * @param maxPrefillAttempts    prefill attempts per request, first try included (at least 1)
 * @param maxDecodeAttempts     decode attempts per request before D's first byte, first try included (at least 1)
 * @param connectTimeout        TCP connect timeout to an instance
 * @param firstByteTimeout      from sending a request to an instance until its first body byte
 * @param totalTimeout          from sending a request to an instance until its last byte
 * @param clientIdleTimeout     a client connection with no request in flight for this long is closed
 * @param maxRequestBytes       largest client request body, in bytes; larger gets 413
 * @param maxResponseBytes      largest non-streamed upstream answer the proxy buffers, in bytes
 * @param healthInterval        time between two health probes of an instance; zero disables probing
 * @param healthTimeout         time a health probe may take
 * @param healthPath            path probed with GET (vLLM serves {@code /health})
 * @param ejectAfterFailures    consecutive failed probes that eject an instance
 * @param readmitAfterSuccesses consecutive good probes that readmit an ejected instance
 * @param startupCheck          what start does when an instance does not serve {@code model}
 * @param prefixAffinityChars   prompt characters hashed by {@link Policy#PREFIX_AFFINITY}
 * @param adminApiKey           key required in {@code X-API-Key} by the admin endpoints; null disables them (500)
 * @param kvEvents              the engines' KV event endpoints, read by {@link Policy#KV_AWARE}
 * @param kvTokenizer           how {@link Policy#KV_AWARE} tokenizes a text prompt
 * @param kvDecodeMaxSuffix     {@link Policy#KV_AWARE}'s conditional disaggregation, in prompt tokens: a prompt of
 *                              which the shared store holds a prefix and at most this many tokens after it goes to D
 *                              alone, which loads the prefix and computes the rest; 0 sends D alone only the prompts
 *                              the store holds whole. Other policies ignore it.
 */
public record ProxyConfig(
        String model,
        List<String> prefill,
        List<String> decode,
        String bindHost,
        int port,
        ProxyFlow flow,
        Policy policy,
        PrefillFailureMode onPrefillFailure,
        int maxPrefillAttempts,
        int maxDecodeAttempts,
        Duration connectTimeout,
        Duration firstByteTimeout,
        Duration totalTimeout,
        Duration clientIdleTimeout,
        long maxRequestBytes,
        long maxResponseBytes,
        Duration healthInterval,
        Duration healthTimeout,
        String healthPath,
        int ejectAfterFailures,
        int readmitAfterSuccesses,
        StartupCheck startupCheck,
        int prefixAffinityChars,
        String adminApiKey,
        List<KvEventEndpoint> kvEvents,
        KvTokenizer kvTokenizer,
        int kvDecodeMaxSuffix) {

    /** Default listening port, as in vLLM's proxy demo. */
    public static final int DEFAULT_PORT = 8000;
    /** Default largest request body: 32 MiB, room for long prompts and inline images. */
    public static final long DEFAULT_MAX_REQUEST_BYTES = 32L << 20;
    /** Default largest buffered (non-streamed) upstream answer: 64 MiB. */
    public static final long DEFAULT_MAX_RESPONSE_BYTES = 64L << 20;
    /**
     * Default {@link #kvDecodeMaxSuffix()}: 64 tokens (four of the demo's 16-token chunks), the size of a short
     * follow-up turn. P would compute those tokens too (it reads nothing from the store), so sending them to D saves
     * the hop to P, P's insert and D's wait for it; a longer suffix would put prefill work on the decode instances.
     * Dynamo's disaggregated router makes the same choice with its own threshold (it prefills on the decode worker
     * when the uncached part of the prompt is short).
     */
    public static final int DEFAULT_KV_DECODE_MAX_SUFFIX = 64;

    /** Copies the lists and checks every field; prefer {@link #builder(String)}. */
    public ProxyConfig {
        if (model == null || model.isBlank()) {
            throw new IllegalArgumentException("model is required: pass the model name every instance serves");
        }
        prefill = List.copyOf(prefill);
        decode = List.copyOf(decode);
        if (decode.isEmpty()) {
            throw new IllegalArgumentException("at least one decode instance (host:port) is required");
        }
        for (String hp : prefill) {
            HostPort.parse(hp);
        }
        for (String hp : decode) {
            HostPort.parse(hp);
        }
        Objects.requireNonNull(bindHost, "bindHost");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        Objects.requireNonNull(flow, "flow");
        Objects.requireNonNull(policy, "policy");
        Objects.requireNonNull(onPrefillFailure, "onPrefillFailure");
        Objects.requireNonNull(startupCheck, "startupCheck");
        positive("maxPrefillAttempts", maxPrefillAttempts);
        positive("maxDecodeAttempts", maxDecodeAttempts);
        positive("connectTimeout", connectTimeout);
        positive("firstByteTimeout", firstByteTimeout);
        positive("totalTimeout", totalTimeout);
        positive("clientIdleTimeout", clientIdleTimeout);
        positive("healthTimeout", healthTimeout);
        if (healthInterval == null || healthInterval.isNegative()) {
            throw new IllegalArgumentException("healthInterval must be zero (off) or positive, was " + healthInterval);
        }
        if (maxRequestBytes <= 0 || maxResponseBytes <= 0) {
            throw new IllegalArgumentException("maxRequestBytes (" + maxRequestBytes + ") and maxResponseBytes ("
                    + maxResponseBytes + ") must be positive");
        }
        if (healthPath == null || !healthPath.startsWith("/")) {
            throw new IllegalArgumentException("healthPath must start with '/', was " + healthPath);
        }
        positive("ejectAfterFailures", ejectAfterFailures);
        positive("readmitAfterSuccesses", readmitAfterSuccesses);
        positive("prefixAffinityChars", prefixAffinityChars);
        if (adminApiKey != null && adminApiKey.isEmpty()) {
            adminApiKey = null;
        }
        kvEvents = List.copyOf(kvEvents);
        if (kvEvents.stream().map(KvEventEndpoint::instance).distinct().count() != kvEvents.size()) {
            throw new IllegalArgumentException("two KV event endpoints for one instance: " + kvEvents);
        }
        if (kvEvents.size() > PrefixIndex.MAX_PUBLISHERS) {
            throw new IllegalArgumentException(kvEvents.size() + " KV event endpoints; at most "
                    + PrefixIndex.MAX_PUBLISHERS);
        }
        Objects.requireNonNull(kvTokenizer, "kvTokenizer");
        if (kvDecodeMaxSuffix < 0) {
            throw new IllegalArgumentException("kvDecodeMaxSuffix (--kv-decode-max-suffix) must be 0 (decode-only "
                    + "only for prompts the store holds whole) or a positive number of prompt tokens, was "
                    + kvDecodeMaxSuffix);
        }
    }

    private static void positive(String name, int value) {
        if (value <= 0) {
            throw new IllegalArgumentException(name + " must be positive, was " + value);
        }
    }

    private static void positive(String name, Duration value) {
        if (value == null || value.isZero() || value.isNegative()) {
            throw new IllegalArgumentException(name + " must be a positive duration, was " + value);
        }
    }

    /** Masks the admin key: configs get logged. */
    @Override
    public String toString() {
        return "ProxyConfig[model=" + model + ", prefill=" + prefill + ", decode=" + decode + ", bind=" + bindHost
                + ":" + port + ", flow=" + flow + ", policy=" + policy + ", onPrefillFailure=" + onPrefillFailure
                + ", kvEvents=" + kvEvents + ", kvTokenizer=" + kvTokenizer + ", kvDecodeMaxSuffix=" + kvDecodeMaxSuffix
                + ", adminApiKey=" + (adminApiKey == null ? "unset" : "****") + "]";
    }

    /** Starts a builder with the defaults for everything but the model. */
    public static Builder builder(String model) {
        return new Builder(model);
    }

    /** Mutable builder of {@link ProxyConfig}; every setter returns this. */
    public static final class Builder {
        private final String model;
        private final List<String> prefill = new ArrayList<>();
        private final List<String> decode = new ArrayList<>();
        private String bindHost = "0.0.0.0";
        private int port = DEFAULT_PORT;
        private ProxyFlow flow = ProxyFlow.V0;
        private Policy policy = Policy.ROUND_ROBIN;
        private PrefillFailureMode onPrefillFailure = PrefillFailureMode.RETRY;
        private int maxPrefillAttempts = 3;
        private int maxDecodeAttempts = 3;
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Duration firstByteTimeout = Duration.ofSeconds(120);
        private Duration totalTimeout = Duration.ofMinutes(10);
        private Duration clientIdleTimeout = Duration.ofSeconds(30);
        private long maxRequestBytes = DEFAULT_MAX_REQUEST_BYTES;
        private long maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
        private Duration healthInterval = Duration.ofSeconds(5);
        private Duration healthTimeout = Duration.ofSeconds(2);
        private String healthPath = "/health";
        private int ejectAfterFailures = 2;
        private int readmitAfterSuccesses = 1;
        private StartupCheck startupCheck = StartupCheck.FAIL;
        private int prefixAffinityChars = 256;
        private String adminApiKey;
        private final List<KvEventEndpoint> kvEvents = new ArrayList<>();
        private KvTokenizer kvTokenizer = KvTokenizer.BYTES;
        private int kvDecodeMaxSuffix = DEFAULT_KV_DECODE_MAX_SUFFIX;

        private Builder(String model) {
            this.model = model;
        }

        /** Adds prefill instances ({@code host:port}). */
        public Builder prefill(String... hostPorts) { prefill.addAll(List.of(hostPorts)); return this; }
        /** Adds decode instances ({@code host:port}). */
        public Builder decode(String... hostPorts) { decode.addAll(List.of(hostPorts)); return this; }
        /** Listening address; default {@code 0.0.0.0}. */
        public Builder bindHost(String v) { bindHost = v; return this; }
        /** Listening port; default 8000, 0 for a free one. */
        public Builder port(int v) { port = v; return this; }
        /** Default {@link ProxyFlow#V0}. */
        public Builder flow(ProxyFlow v) { flow = v; return this; }
        /** Default {@link Policy#ROUND_ROBIN}. */
        public Builder policy(Policy v) { policy = v; return this; }
        /** Default {@link PrefillFailureMode#RETRY}. */
        public Builder onPrefillFailure(PrefillFailureMode v) { onPrefillFailure = v; return this; }
        /** Default 3. */
        public Builder maxPrefillAttempts(int v) { maxPrefillAttempts = v; return this; }
        /** Default 3. */
        public Builder maxDecodeAttempts(int v) { maxDecodeAttempts = v; return this; }
        /** Default 5 s. */
        public Builder connectTimeout(Duration v) { connectTimeout = v; return this; }
        /** Default 120 s: a long prompt on a loaded prefill instance takes a while. */
        public Builder firstByteTimeout(Duration v) { firstByteTimeout = v; return this; }
        /** Default 10 min. */
        public Builder totalTimeout(Duration v) { totalTimeout = v; return this; }
        /** Default 30 s, as the JDK server the proxy once used: clients that leave without closing do not pile up. */
        public Builder clientIdleTimeout(Duration v) { clientIdleTimeout = v; return this; }
        /** Default 32 MiB. */
        public Builder maxRequestBytes(long v) { maxRequestBytes = v; return this; }
        /** Default 64 MiB. */
        public Builder maxResponseBytes(long v) { maxResponseBytes = v; return this; }
        /** Default 5 s; {@link Duration#ZERO} disables health probing. */
        public Builder healthInterval(Duration v) { healthInterval = v; return this; }
        /** Default 2 s. */
        public Builder healthTimeout(Duration v) { healthTimeout = v; return this; }
        /** Default {@code /health}. */
        public Builder healthPath(String v) { healthPath = v; return this; }
        /** Default 2. */
        public Builder ejectAfterFailures(int v) { ejectAfterFailures = v; return this; }
        /** Default 1. */
        public Builder readmitAfterSuccesses(int v) { readmitAfterSuccesses = v; return this; }
        /** Default {@link StartupCheck#FAIL}. */
        public Builder startupCheck(StartupCheck v) { startupCheck = v; return this; }
        /** Default 256 characters. */
        public Builder prefixAffinityChars(int v) { prefixAffinityChars = v; return this; }
        /** Key for the admin endpoints; null (default) answers them with 500. */
        public Builder adminApiKey(String v) { adminApiKey = v; return this; }
        /** Adds an engine's KV event endpoints (see {@link KvEventEndpoint}). */
        public Builder kvEvents(KvEventEndpoint v) { kvEvents.add(v); return this; }
        /** See {@link ProxyConfig#kvTokenizer()}; default {@link KvTokenizer#BYTES}. */
        public Builder kvTokenizer(KvTokenizer v) { kvTokenizer = v; return this; }
        /** See {@link ProxyConfig#kvDecodeMaxSuffix()}; default {@value ProxyConfig#DEFAULT_KV_DECODE_MAX_SUFFIX}. */
        public Builder kvDecodeMaxSuffix(int v) { kvDecodeMaxSuffix = v; return this; }

        /** Validates and returns the config; throws {@link IllegalArgumentException} naming the bad value. */
        public ProxyConfig build() {
            return new ProxyConfig(model, prefill, decode, bindHost, port, flow, policy, onPrefillFailure,
                    maxPrefillAttempts, maxDecodeAttempts, connectTimeout, firstByteTimeout, totalTimeout,
                    clientIdleTimeout, maxRequestBytes, maxResponseBytes, healthInterval, healthTimeout, healthPath,
                    ejectAfterFailures, readmitAfterSuccesses, startupCheck, prefixAffinityChars, adminApiKey,
                    kvEvents, kvTokenizer, kvDecodeMaxSuffix);
        }
    }
}
