package dev.kvconnector.mooncake;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The configuration of a {@code mooncake://} store, from the URI and the {@code mooncake.json} that the environment
 * variable {@value #ENV_CONFIG_PATH} names (the same file, field names and defaults as vLLM's Mooncake connector).
 * URI options override the file. {@link #from} validates everything before any native call, because the native
 * client's own errors for these mistakes name no host, port or cause.
 *
 * <pre>
 * mooncake://MASTER_HOST:50051?metadata=http://MASTER_HOST:8080/metadata&amp;local_hostname=10.0.0.7
 *     &amp;protocol=tcp&amp;device=&amp;segment=3GiB&amp;buffer=1GiB&amp;replicas=1&amp;library=/opt/mooncake/libmooncake_store.so
 *     &amp;staging=64MiB&amp;staging-slots=8&amp;lease-policy=wait&amp;lease-wait=15s&amp;full-retries=8&amp;full-backoff=5ms
 *     &amp;probe-timeout=3s&amp;setup-timeout=30s
 * </pre>
 *
 * @param masterServerAddress the master's {@code host:port}
 * @param metadataServer {@code http://h:p/metadata}, {@code etcd://h:p}, {@code redis://h:p} or {@code P2PHANDSHAKE}
 * @param localHostname this client's address as peers reach it, optionally with {@code :port}
 * @param protocol {@code tcp} or {@code rdma}
 * @param deviceName comma-separated RDMA NICs, or empty
 * @param globalSegmentBytes memory this client lends to the pool, in bytes
 * @param localBufferBytes the native client's own staging buffer for plain puts, in bytes
 * @param replicas the default replica count of a put
 * @param library the {@code library=} option, or null
 * @param stagingBytes this store's registered staging region for unregistered values, in bytes
 * @param stagingSlots how many equal slots the staging region is cut into (concurrent transfers through staging)
 * @param leasePolicy what a remove does about a leased object
 * @param leaseWaitMillis how long {@link LeasePolicy#WAIT} waits for a lease to end, in ms
 * @param fullRetries how many times a put that finds the pool full (-200) is retried
 * @param fullBackoffMillis the first back-off before such a retry, in ms; it doubles each time
 * @param gpuDirect whether {@code register_buffer} is given CUDA device memory, so puts and gets move device KV
 *     without a host copy (GPUDirect RDMA); needs a {@code libmooncake_store.so} built with {@code USE_CUDA}
 * @param configFile the {@code mooncake.json} read, or null
 * @param probeTimeoutMillis the deadline of the TCP connect that probes the master (and an {@code http://} metadata
 *     server) before setup, in ms; 0 skips the probe
 * @param setupTimeoutMillis the deadline of the native {@code setup} call, in ms
 * @param claimView whether the store declares {@code CLAIM} and {@code VIEW} over its staging slots
 */
public record MooncakeConfig(String masterServerAddress, String metadataServer, String localHostname,
                             String protocol, String deviceName, long globalSegmentBytes, long localBufferBytes,
                             int replicas, String library, long stagingBytes, int stagingSlots,
                             LeasePolicy leasePolicy, long leaseWaitMillis, int fullRetries, long fullBackoffMillis,
                             boolean gpuDirect, Path configFile, long probeTimeoutMillis,
                             long setupTimeoutMillis, boolean claimView) {

    /** The environment variable naming {@code mooncake.json}. */
    public static final String ENV_CONFIG_PATH = "MOONCAKE_CONFIG_PATH";

    /** URI option: metadata server. */
    public static final String PROP_METADATA = "metadata";
    /** URI option: {@code tcp} or {@code rdma}. */
    public static final String PROP_PROTOCOL = "protocol";
    /** Default protocol. */
    public static final String DEFAULT_PROTOCOL = "tcp";
    /** URI option: RDMA device names. */
    public static final String PROP_DEVICE = "device";
    /** URI option: this client's address. */
    public static final String PROP_LOCAL_HOSTNAME = "local_hostname";
    /** URI option: global segment size (bytes, or 3GiB and the like). */
    public static final String PROP_SEGMENT = "segment";
    /** Default global segment size, as in vLLM: 3355443200 bytes. */
    public static final long DEFAULT_SEGMENT_BYTES = 3_355_443_200L;
    /** URI option: local buffer size. */
    public static final String PROP_BUFFER = "buffer";
    /** Default local buffer size, as in vLLM: 1 GiB. */
    public static final long DEFAULT_BUFFER_BYTES = 1L << 30;
    /** URI option: default replica count. */
    public static final String PROP_REPLICAS = "replicas";
    /** Default replica count. */
    public static final int DEFAULT_REPLICAS = 1;
    /** URI option: path of libmooncake_store.so. */
    public static final String PROP_LIBRARY = "library";
    /** URI option: staging region size. */
    public static final String PROP_STAGING = "staging";
    /** Default staging region: 64 MiB. */
    public static final long DEFAULT_STAGING_BYTES = 64L << 20;
    /** URI option: staging slots. */
    public static final String PROP_STAGING_SLOTS = "staging-slots";
    /** Default staging slots: 8 (8 MiB each by default). */
    public static final int DEFAULT_STAGING_SLOTS = 8;
    /** URI option: {@code wait} or {@code force}. */
    public static final String PROP_LEASE_POLICY = "lease-policy";
    /** Default lease policy. */
    public static final LeasePolicy DEFAULT_LEASE_POLICY = LeasePolicy.WAIT;
    /** URI option: the longest wait for a lease to end. */
    public static final String PROP_LEASE_WAIT = "lease-wait";
    /** Default lease wait: 15 s, above Mooncake's default lease of 10 s. */
    public static final long DEFAULT_LEASE_WAIT_MILLIS = 15_000;
    /** URI option: retries of a put that finds the pool full. */
    public static final String PROP_FULL_RETRIES = "full-retries";
    /** Default retries of a full put. */
    public static final int DEFAULT_FULL_RETRIES = 8;
    /** URI option: the first back-off of such a retry. */
    public static final String PROP_FULL_BACKOFF = "full-backoff";
    /** Default first back-off: 5 ms (doubling: about 1.3 s over 8 retries). */
    public static final long DEFAULT_FULL_BACKOFF_MILLIS = 5;

    /**
     * URI option: {@code true} or {@code false}. Default: {@code true} with {@code protocol=rdma} (GPUDirect RDMA needs
     * an RDMA NIC and nvidia-peermem), {@code false} with {@code tcp}, where device KV goes through pinned host staging
     * (a TCP transfer copies through the host anyway, and a store built without {@code USE_CUDA} would read the device
     * address as host memory and crash).
     */
    public static final String PROP_GPU_DIRECT = "gpu-direct";

    /**
     * URI option: the deadline of the TCP connect that probes the master, and the metadata server when it is
     * {@code http://}, before setup; {@code 0} skips the probe (the test double, which has no master).
     */
    public static final String PROP_PROBE_TIMEOUT = "probe-timeout";
    /** Default probe deadline: 3 s, ample for a master on the same network. */
    public static final long DEFAULT_PROBE_TIMEOUT_MILLIS = 3_000;
    /** URI option: the deadline of the native setup call. */
    public static final String PROP_SETUP_TIMEOUT = "setup-timeout";
    /**
     * Default setup deadline: 30 s. Upstream's setup retries 20 times, about 4.4 s each, when {@code local_hostname}
     * has no port, so a setup that cannot reach the master took 134 s before it failed.
     */
    public static final long DEFAULT_SETUP_TIMEOUT_MILLIS = 30_000;

    /**
     * URI option: {@code true} or {@code false}. With {@code true} the store declares {@code CLAIM} and {@code VIEW}:
     * a claim lends a registered staging slot to write in place and {@code put_from}s it on commit, a view
     * {@code get_into}s a slot and lends it out (see {@link MooncakeStore}).
     */
    public static final String PROP_CLAIM_VIEW = "claim-view";
    /**
     * Default: off. The connector registers its staging with the store, so its staged path already moves registered
     * memory with no extra copy; against the test double claims measured no faster and views 2x slower (one
     * {@code get_into} per object instead of one batch per layer), see the benchmarks' REPORT.md. Useful to a
     * caller of the store whose own memory is not registered: a claim or view saves it the staging copy.
     */
    public static final boolean DEFAULT_CLAIM_VIEW = false;

    /** Every URI option. */
    public static final Set<String> KNOWN_OPTIONS = Set.of(PROP_METADATA, PROP_PROTOCOL, PROP_DEVICE,
            PROP_LOCAL_HOSTNAME, PROP_SEGMENT, PROP_BUFFER, PROP_REPLICAS, PROP_LIBRARY, PROP_STAGING,
            PROP_STAGING_SLOTS, PROP_LEASE_POLICY, PROP_LEASE_WAIT, PROP_FULL_RETRIES, PROP_FULL_BACKOFF,
            PROP_GPU_DIRECT, PROP_PROBE_TIMEOUT, PROP_SETUP_TIMEOUT, PROP_CLAIM_VIEW);

    private static final int DEFAULT_MASTER_PORT = 50051;
    private static final long MIN_SLOT_BYTES = 4096;

    /**
     * Reads the URI and, when {@value #ENV_CONFIG_PATH} is set in {@code env}, {@code mooncake.json}, then validates.
     *
     * @throws KVException {@code INVALID_URI} for a malformed option, {@code INVALID_CONFIG} for a bad setting
     */
    public static MooncakeConfig from(StoreUri uri, Map<String, String> env) {
        uri.requireKnownParams(KNOWN_OPTIONS).requireNoUserInfo();
        String masked = uri.masked();
        JsonNode file = null;
        Path filePath = null;
        String fileEnv = env.get(ENV_CONFIG_PATH);
        if (fileEnv != null && !fileEnv.isBlank()) {
            filePath = Path.of(fileEnv.trim());
            file = readJson(filePath, masked);
        }
        String master = null;
        if (!uri.hosts().isEmpty()) {
            if (uri.hosts().size() > 1) {
                throw invalid(masked, "a mooncake:// URI names one master, found " + uri.hosts().size() + " hosts",
                        "write mooncake://MASTER_HOST:" + DEFAULT_MASTER_PORT);
            }
            StoreUri.HostPort hp = uri.hosts().getFirst();
            if (hp.port() < 0) {
                throw invalid(masked, "the master '" + hp.host() + "' has no port",
                        "write mooncake://" + hp.host() + ":" + DEFAULT_MASTER_PORT
                                + " (mooncake_master's default --rpc_port)");
            }
            master = hp.host().contains(":") ? "[" + hp.host() + "]:" + hp.port() : hp.toString();
        } else {
            master = text(file, "master_server_address");
            if (master != null) {
                requirePort(master, masked);
            }
        }
        if (master == null || master.isBlank()) {
            throw invalid(masked, "no master address", "write mooncake://MASTER_HOST:" + DEFAULT_MASTER_PORT
                    + ", or set master_server_address in the mooncake.json named by " + ENV_CONFIG_PATH);
        }
        String metadata = pick(uri.param(PROP_METADATA), text(file, "metadata_server"));
        String local = pick(uri.param(PROP_LOCAL_HOSTNAME), text(file, "local_hostname"));
        String protocol = pick(uri.param(PROP_PROTOCOL), text(file, "protocol"));
        String device = pick(uri.param(PROP_DEVICE), text(file, "device_name"));
        long segment = uri.param(PROP_SEGMENT) != null ? uri.sizeParam(PROP_SEGMENT, 0)
                : size(file, "global_segment_size", DEFAULT_SEGMENT_BYTES, masked);
        long buffer = uri.param(PROP_BUFFER) != null ? uri.sizeParam(PROP_BUFFER, 0)
                : size(file, "local_buffer_size", DEFAULT_BUFFER_BYTES, masked);
        LeasePolicy policy = switch (uri.param(PROP_LEASE_POLICY) == null ? "wait"
                : uri.param(PROP_LEASE_POLICY).trim().toLowerCase(Locale.ROOT)) {
            case "wait" -> LeasePolicy.WAIT;
            case "force" -> LeasePolicy.FORCE;
            default -> throw KVException.of(ErrorCode.INVALID_URI, "lease-policy=" + uri.param(PROP_LEASE_POLICY)
                    + " is neither wait nor force").store(masked).build();
        };
        String proto = protocol == null || protocol.isBlank() ? DEFAULT_PROTOCOL
                : protocol.trim().toLowerCase(Locale.ROOT);
        MooncakeConfig c = new MooncakeConfig(master, metadata, local, proto,
                device == null ? "" : device.trim(), segment, buffer,
                uri.intParam(PROP_REPLICAS, DEFAULT_REPLICAS), uri.param(PROP_LIBRARY),
                uri.sizeParam(PROP_STAGING, DEFAULT_STAGING_BYTES),
                uri.intParam(PROP_STAGING_SLOTS, DEFAULT_STAGING_SLOTS), policy,
                uri.durationMillisParam(PROP_LEASE_WAIT, DEFAULT_LEASE_WAIT_MILLIS),
                uri.intParam(PROP_FULL_RETRIES, DEFAULT_FULL_RETRIES),
                uri.durationMillisParam(PROP_FULL_BACKOFF, DEFAULT_FULL_BACKOFF_MILLIS),
                uri.boolParam(PROP_GPU_DIRECT, proto.equals("rdma")), filePath,
                uri.durationMillisParam(PROP_PROBE_TIMEOUT, DEFAULT_PROBE_TIMEOUT_MILLIS),
                uri.durationMillisParam(PROP_SETUP_TIMEOUT, DEFAULT_SETUP_TIMEOUT_MILLIS),
                uri.boolParam(PROP_CLAIM_VIEW, DEFAULT_CLAIM_VIEW));
        c.validate(masked);
        return c;
    }

    /** The bytes of one staging slot: the largest unregistered value a put or get can move. */
    public long stagingSlotBytes() {
        return stagingBytes / stagingSlots;
    }

    private void validate(String masked) {
        String fileNote = configFile != null ? " (URI options override " + configFile + ")" : "";
        if (localHostname == null || localHostname.isBlank()) {
            throw invalid(masked, "local_hostname is empty" + fileNote,
                    "set local_hostname= (or local_hostname in mooncake.json) to this host's IP address as the master "
                            + "and the other clients reach it; Mooncake rejects an empty one with -600");
        }
        if (metadataServer == null || metadataServer.isBlank()) {
            throw invalid(masked, "no metadata server" + fileNote, "set metadata=http://MASTER_HOST:8080/metadata "
                    + "(the master's --enable_http_metadata_server) or metadata=P2PHANDSHAKE");
        }
        if (!protocol.equals("tcp") && !protocol.equals("rdma")) {
            throw invalid(masked, "protocol '" + protocol + "' is neither tcp nor rdma", "set protocol=tcp or rdma");
        }
        String localHost = hostOf(localHostname);
        String masterHost = hostOf(masterServerAddress);
        if (isLoopback(localHost) && !isLoopback(masterHost)) {
            throw invalid(masked, "local_hostname " + localHostname + " is a loopback address but the master "
                            + masterServerAddress + " is not",
                    "peers would connect to " + localHost + ", that is to themselves: set local_hostname to this "
                            + "host's address on the network the master " + masterHost + " is on");
        }
        if (replicas < 1) {
            throw invalid(masked, "replicas=" + replicas + " is below 1", "Mooncake rejects replica_num 0 with -600");
        }
        if (stagingSlots < 1 || stagingSlotBytes() < MIN_SLOT_BYTES) {
            throw invalid(masked, "staging=" + stagingBytes + " bytes in " + stagingSlots + " slots gives slots of "
                    + (stagingSlots < 1 ? 0 : stagingSlotBytes()) + " bytes", "give staging-slots >= 1 and slots of "
                    + "at least " + MIN_SLOT_BYTES + " bytes");
        }
        if (setupTimeoutMillis <= 0) {
            throw invalid(masked, "setup-timeout=" + setupTimeoutMillis + " ms is not above 0",
                    "give a deadline such as 30s");
        }
        if (fullRetries < 0) {
            throw invalid(masked, "full-retries=" + fullRetries + " is negative", "give 0 or more");
        }
    }

    private static void requirePort(String hostPort, String masked) {
        String h = hostPort.trim();
        int colon = h.lastIndexOf(':');
        boolean bracketed = h.startsWith("[");
        if (colon < 0 || (bracketed && colon < h.indexOf(']')) || colon == h.length() - 1) {
            throw invalid(masked, "master_server_address '" + h + "' has no port",
                    "write " + h + ":" + DEFAULT_MASTER_PORT + " (mooncake_master's default --rpc_port)");
        }
        try {
            int port = Integer.parseInt(h.substring(colon + 1));
            if (port < 1 || port > 65535) {
                throw new NumberFormatException();
            }
        } catch (NumberFormatException e) {
            throw invalid(masked, "master_server_address '" + h + "' has a bad port", "use a port in 1-65535");
        }
    }

    static String hostOf(String hostPort) {
        String h = hostPort.trim();
        if (h.startsWith("[")) {
            int end = h.indexOf(']');
            return end > 0 ? h.substring(1, end) : h;
        }
        int colon = h.indexOf(':');
        return colon >= 0 && colon == h.lastIndexOf(':') ? h.substring(0, colon) : h;
    }

    static boolean isLoopback(String host) {
        String h = host.toLowerCase(Locale.ROOT);
        return h.equals("localhost") || h.startsWith("127.") || h.equals("::1") || h.equals("0:0:0:0:0:0:0:1");
    }

    private static String pick(String fromUri, String fromFile) {
        return fromUri != null ? fromUri : fromFile;
    }

    private static String text(JsonNode file, String field) {
        if (file == null || !file.hasNonNull(field)) {
            return null;
        }
        return file.get(field).asText();
    }

    private static long size(JsonNode file, String field, long dflt, String masked) {
        if (file == null || !file.hasNonNull(field)) {
            return dflt;
        }
        JsonNode n = file.get(field);
        if (n.isIntegralNumber() && n.asLong() >= 0) {
            return n.asLong();
        }
        if (n.isTextual()) {
            return StoreUri.parseSize(field, n.asText(), masked);
        }
        throw invalid(masked, "mooncake.json field " + field + "=" + n + " is not a size in bytes",
                "give a non-negative integer such as 3355443200");
    }

    private static JsonNode readJson(Path p, String masked) {
        try {
            JsonNode n = new ObjectMapper().readTree(Files.readString(p));
            if (n == null || !n.isObject()) {
                throw invalid(masked, p + " (named by " + ENV_CONFIG_PATH + ") is not a JSON object",
                        "write {\"local_hostname\": ..., \"metadata_server\": ..., \"master_server_address\": ...}");
            }
            return n;
        } catch (IOException e) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "cannot read " + p + " (named by " + ENV_CONFIG_PATH
                            + "): " + e.getMessage())
                    .store(masked).operation("open").cause(e)
                    .hint("fix the path in " + ENV_CONFIG_PATH + ", or unset it and give the options in the URI")
                    .build();
        }
    }

    private static KVException invalid(String masked, String detail, String hint) {
        return KVException.of(ErrorCode.INVALID_CONFIG, detail).store(masked).operation("open").hint(hint).build();
    }
}
