package dev.kvconnector.valkey;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.SubscriptionThread;
import dev.kvconnector.valkey.resp.ConnectionPool;
import dev.kvconnector.valkey.resp.Endpoint;
import dev.kvconnector.valkey.resp.RespConnection;
import dev.kvconnector.valkey.resp.RespReader;
import dev.kvconnector.valkey.resp.RespSettings;
import dev.kvconnector.valkey.resp.RespWriter;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KVStore} on a Valkey or Redis server (standalone), through the zero-copy RESP client of
 * {@code dev.kvconnector.valkey.resp}.
 *
 * <p>URI: {@code valkey://[user:password@]host[:port][/db]?ttl=..&timeout=..&connect-timeout=..&pool=..
 * &max-reply=..&protocol=..}; {@code redis://} is an alias; {@code valkeys://} and {@code rediss://} are the same
 * over TLS, with the options of {@link TlsContexts} besides. Options:
 * <ul>
 *   <li>{@code ttl}: default time to live of a put without its own TTL (0 = none; {@code 30s}, {@code 5m}).</li>
 *   <li>{@code timeout}: how long an operation may make no progress before TIMEOUT (default 5s).</li>
 *   <li>{@code connect-timeout}: TCP connect limit (default 2s).</li>
 *   <li>{@code pool}: connections at most (default 8).</li>
 *   <li>{@code max-reply}: the largest reply accepted (default 512MiB); longer is PROTOCOL_ERROR.</li>
 *   <li>{@code protocol}: {@code auto} (RESP3 when the server offers it, else RESP2), {@code 2} or {@code 3}.</li>
 * </ul>
 *
 * <p>Operations: put is {@code SET key value [PX ttl] [NX]}; getInto is GET read straight into the destination;
 * when the destination is too small the payload is read and discarded and the result is too-small with the real
 * size. This costs a wasted transfer only in that rare case, whereas asking STRLEN first would cost a round trip
 * on every get. size is STRLEN and EXISTS pipelined in one round trip (STRLEN alone answers 0 for a missing
 * key); remove is UNLINK, which frees large values off the server's main thread. Batches are pipelined: every
 * command in one flush, then every reply in order.
 *
 * <p>Events ({@link StoreCapability#EVENTS}, {@link #subscribe}): the server's keyspace notifications, when its
 * {@code notify-keyspace-events} has them on; {@link ValkeySubscription} says which and what happens when not.
 *
 * <p>Over 400 lines because each KVStore operation is its own RESP command sequence with its reply checks (single and
 * pipelined batches, TTL); the protocol itself lives in {@code resp/}.
 */
public final class ValkeyStore implements KVStore {
    private static final Logger LOG = LoggerFactory.getLogger(ValkeyStore.class);
    /** The options this store accepts in its URI. */
    public static final Set<String> OPTIONS = Set.of("ttl", "timeout", "connect-timeout", "pool", "max-reply",
            "protocol");
    /** The port used when the URI names none. */
    public static final int DEFAULT_PORT = 6379;
    /** The value ceiling assumed when the server refuses CONFIG GET proto-max-bulk-len, in bytes. */
    public static final long DEFAULT_MAX_VALUE_BYTES = 512L << 20;

    private static final int BUFFER_BYTES = 64 * 1024;
    private static final int MAX_ELEMENTS = 1 << 20;
    private static final byte[] SET = RespWriter.token("SET");
    private static final byte[] GET = RespWriter.token("GET");
    private static final byte[] STRLEN = RespWriter.token("STRLEN");
    private static final byte[] EXISTS = RespWriter.token("EXISTS");
    private static final byte[] UNLINK = RespWriter.token("UNLINK");
    private static final byte[] PX = RespWriter.token("PX");
    private static final byte[] NX = RespWriter.token("NX");
    private static final byte[] PING = RespWriter.token("PING");
    private static final byte[] INFO = RespWriter.token("INFO");
    private static final byte[] SERVER = RespWriter.token("server");
    private static final byte[] CONFIG = RespWriter.token("CONFIG");
    private static final byte[] CONFIG_GET = RespWriter.token("GET");
    private static final byte[] ASKING = RespWriter.token("ASKING");
    private static final byte[] CLUSTER = RespWriter.token("CLUSTER");
    private static final byte[] SLOTS = RespWriter.token("SLOTS");
    private static final String OP_PUT = "put";
    private static final String OP_GET = "get";
    private static final String OP_SIZE = "size";
    private static final String OP_REMOVE = "remove";
    private static final String OP_PUT_BATCH = "putBatch";
    private static final String OP_GET_BATCH = "getIntoBatch";
    private static final String OP_REMOVE_BATCH = "removeBatch";

    private final StoreUri uri;
    private final Endpoint endpoint;
    private final ConnectionPool pool;
    private final long defaultTtlMillis;
    private final int maxKeyBytes;
    private final long maxValueBytes;
    private final String maxmemoryPolicy;
    private final int protocol;
    private final boolean clusterNode;
    private final RespSettings settings;
    /** Open event subscriptions, closed with the store; guarded by itself. */
    private final List<ValkeySubscription> subscriptions = new ArrayList<>();

    private ValkeyStore(StoreUri uri, Endpoint endpoint, ConnectionPool pool, long defaultTtlMillis,
                        ServerLimits limits, boolean clusterNode, RespSettings settings) {
        this.uri = uri;
        this.settings = settings;
        this.endpoint = endpoint;
        this.pool = pool;
        this.defaultTtlMillis = defaultTtlMillis;
        this.maxKeyBytes = BUFFER_BYTES / 2;
        this.maxValueBytes = limits.maxValueBytes();
        this.maxmemoryPolicy = limits.maxmemoryPolicy();
        this.protocol = limits.protocol();
        this.clusterNode = clusterNode;
    }

    /** What the server told us at open; {@code maxmemoryBytes} is -1 when CONFIG GET was refused. */
    private record ServerLimits(long maxValueBytes, String maxmemoryPolicy, long maxmemoryBytes, int protocol) {
    }

    /**
     * Opens a store and connects once, so that a wrong host, port or password fails here rather than on the
     * first put. Reads the server's {@code proto-max-bulk-len} and {@code maxmemory-policy}.
     */
    public static ValkeyStore open(StoreUri uri) {
        StoreUri.HostPort hp = uri.singleHost(DEFAULT_PORT);
        return openNode(uri, hp.host(), hp.port(), settings(uri, database(uri)), false);
    }

    /** Whether the URI's scheme asks for TLS. */
    static boolean isTls(StoreUri uri) {
        return uri.scheme().startsWith("valkeys") || uri.scheme().startsWith("rediss");
    }

    /** Validates the URI's options and turns them into client settings. */
    static RespSettings settings(StoreUri uri, int database) {
        boolean tls = isTls(uri);
        if (tls) {
            Set<String> known = new HashSet<>(OPTIONS);
            known.addAll(TlsContexts.OPTIONS);
            uri.requireKnownParams(known);
        } else {
            uri.requireKnownParams(OPTIONS);
        }
        if (uri.user() != null && uri.password() == null) {
            throw KVException.of(ErrorCode.INVALID_URI, "the URI names a user but no password (no ':' before '@')")
                    .store(uri.masked()).operation("open")
                    .hint("write " + uri.scheme() + "://user:password@host, or " + uri.scheme()
                            + "://:password@host for the default user").build();
        }
        return new RespSettings(uri.user(), uri.password(), database, protocol(uri),
                positive(uri, "timeout", uri.durationMillisParam("timeout", 5_000)),
                positive(uri, "connect-timeout", uri.durationMillisParam("connect-timeout", 2_000)),
                (int) positive(uri, "pool", uri.intParam("pool", 8)),
                positive(uri, "max-reply", uri.sizeParam("max-reply", 512L << 20)),
                MAX_ELEMENTS, BUFFER_BYTES, tls ? TlsContexts.fromUri(uri) : null,
                uri.boolParam("verify-hostname", true));
    }

    /**
     * Opens a store on one server. A cluster node's store reports MOVED and ASK replies as {@link Redirect}s for
     * {@link ValkeyClusterStore} to follow, and prefixes its commands with ASKING while
     * {@link ClusterAsking#active()}.
     */
    static ValkeyStore openNode(StoreUri uri, String host, int port, RespSettings settings, boolean clusterNode) {
        Endpoint endpoint = new Endpoint(host, port, uri.masked());
        ConnectionPool pool = new ConnectionPool(endpoint, settings);
        try {
            ServerLimits limits = readServerLimits(pool, endpoint);
            String warning = memoryPolicyWarning(endpoint.hostPort(), limits.maxmemoryPolicy(),
                    limits.maxmemoryBytes());
            if (warning != null) {
                LOG.warn(warning);
            }
            return new ValkeyStore(uri, endpoint, pool, uri.durationMillisParam("ttl", 0), limits, clusterNode,
                    settings);
        } catch (RuntimeException e) {
            pool.close();
            throw e;
        }
    }

    private static int database(StoreUri uri) {
        String p = uri.path();
        if (p.isEmpty() || p.equals("/")) {
            return 0;
        }
        try {
            int db = Integer.parseInt(p.substring(1));
            if (db >= 0) {
                return db;
            }
        } catch (NumberFormatException e) {
            // Falls through to the error below, which names the path.
        }
        throw KVException.of(ErrorCode.INVALID_URI, "the path '" + p + "' is not a database number such as /0")
                .store(uri.masked()).operation("open").build();
    }

    private static int protocol(StoreUri uri) {
        String p = uri.param("protocol");
        if (p == null || p.equals("auto")) {
            return 0;
        }
        if (p.equals("2") || p.equals("3")) {
            return Integer.parseInt(p);
        }
        throw KVException.of(ErrorCode.INVALID_URI, "option protocol=" + p + " is not auto, 2 or 3")
                .store(uri.masked()).operation("open").build();
    }

    private static long positive(StoreUri uri, String name, long v) {
        if (v <= 0) {
            throw KVException.of(ErrorCode.INVALID_URI, "option " + name + " must be positive, got " + v)
                    .store(uri.masked()).operation("open").build();
        }
        return v;
    }

    private static ServerLimits readServerLimits(ConnectionPool pool, Endpoint endpoint) {
        RespConnection c = pool.borrow("open", null);
        boolean clean = false;
        try {
            c.writer().array(3).raw(CONFIG).raw(CONFIG_GET).bulk("proto-max-bulk-len")
                    .array(3).raw(CONFIG).raw(CONFIG_GET).bulk("maxmemory-policy")
                    .array(3).raw(CONFIG).raw(CONFIG_GET).bulk("maxmemory").flush();
            Map<String, String> bulkLen = c.reader().readStringMap();
            String configError = bulkLen == null ? c.reader().lastError() : null;
            Map<String, String> policy = c.reader().readStringMap();
            Map<String, String> maxmemory = c.reader().readStringMap();
            clean = true;
            if (configError != null && configError.startsWith("NOAUTH")) {
                // RESP2 without a password sends no AUTH: the first command is where a server says it needs one.
                throw KVException.of(ErrorCode.AUTH_FAILED, endpoint.hostPort() + " refused the command: "
                                + c.sanitize(configError))
                        .store(endpoint.maskedUri()).operation("open")
                        .hint("the server requires a password: valkey://[user]:password@host:port").build();
            }
            long maxValue = configLong(bulkLen, "proto-max-bulk-len", DEFAULT_MAX_VALUE_BYTES);
            String mm = policy == null ? null : policy.get("maxmemory-policy");
            return new ServerLimits(maxValue, mm == null ? "unknown (CONFIG GET refused)" : mm,
                    configLong(maxmemory, "maxmemory", -1), c.protocol());
        } finally {
            pool.release(c, clean);
        }
    }

    private static long configLong(Map<String, String> config, String name, long fallback) {
        String v = config == null ? null : config.get(name);
        if (v == null) {
            return fallback;
        }
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            return fallback;
        }
    }

    /**
     * The warning logged at open when the server refuses writes rather than evicting: {@code noeviction} (the
     * server's default) suits a database, not a cache that fills up by design. Null for other policies.
     *
     * @param maxmemoryBytes the server's maxmemory in bytes; 0 for none; -1 when unknown
     */
    static String memoryPolicyWarning(String hostPort, String policy, long maxmemoryBytes) {
        if (!"noeviction".equals(policy)) {
            return null;
        }
        String consequence = maxmemoryBytes == 0
                ? "no maxmemory is set, so the server grows until the machine runs out of memory (and may be "
                + "killed); set maxmemory, and maxmemory-policy allkeys-lru"
                : "once its memory is full" + (maxmemoryBytes > 0 ? " (maxmemory " + maxmemoryBytes + " bytes)" : "")
                + ", every put fails with STORE_FULL instead of evicting old entries; a KV cache wants "
                + "maxmemory-policy allkeys-lru, or volatile-lru with ttl= set";
        return hostPort + " runs with maxmemory-policy noeviction: " + consequence;
    }

    @Override
    public String uri() {
        return uri.masked();
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return EnumSet.of(StoreCapability.NATIVE_TTL, StoreCapability.BATCH, StoreCapability.SHARED_ACROSS_PROCESSES,
                StoreCapability.REMOVE, StoreCapability.EVENTS, StoreCapability.PIPELINED_READ);
    }

    /**
     * Subscribes {@code listener} to the server's keyspace notifications of this store's database, on a connection
     * and a thread of its own ({@code kvconnector-events-valkey-N}); returns once that connection is subscribed, or
     * failed to be (within connect-timeout and timeout; a server that is down is reported to {@code errors} and
     * retried in the background, never thrown). Logs a warning naming the server and the
     * {@code CONFIG SET notify-keyspace-events} to run when the server has them off.
     */
    @Override
    public StoreSubscription subscribe(StoreEventListener listener, ErrorHandler errors) {
        if (pool.isClosed()) {
            throw KVException.of(ErrorCode.CLOSED, "the store was closed").store(uri.masked()).operation("subscribe")
                    .build();
        }
        if (listener == null || errors == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "subscribe needs a listener and an error handler")
                    .store(uri.masked()).operation("subscribe").build();
        }
        ValkeySubscription s = new ValkeySubscription(uri.masked(), endpoint, settings, listener, errors,
                this::forget);
        synchronized (subscriptions) {
            subscriptions.add(s);
        }
        s.start();
        return s;
    }

    private void forget(SubscriptionThread s) {
        synchronized (subscriptions) {
            subscriptions.remove(s);
        }
    }

    /** The largest value this store accepts, in bytes: the server's {@code proto-max-bulk-len}. */
    public long maxValueBytes() {
        return maxValueBytes;
    }

    /** The RESP version in use: 2 or 3. */
    public int protocol() {
        return protocol;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        checkPut(OP_PUT, key, value);
        long ttl = ttl(options);
        RespConnection c = pool.borrow(OP_PUT, key);
        boolean clean = false;
        try {
            boolean asked = asking(c);
            writeSet(c.writer(), key, value, ttl, options.ifAbsent());
            c.writer().flush();
            skipAsking(c, asked);
            long r = c.reader().readStatus();
            clean = true;
            if (r == RespReader.REPLY_ERROR) {
                throw replyError(c, OP_PUT, key);
            }
            return r == 1;
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        checkKey(OP_GET, key);
        checkWritable(OP_GET, key, dst);
        RespConnection c = pool.borrow(OP_GET, key);
        boolean clean = false;
        try {
            boolean asked = asking(c);
            c.writer().array(2).raw(GET).bulk(key).flush();
            skipAsking(c, asked);
            long r = c.reader().readBulkInto(dst);
            clean = true;
            if (r == RespReader.REPLY_ERROR) {
                throw replyError(c, OP_GET, key);
            }
            return r;
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public long size(String key) {
        checkKey(OP_SIZE, key);
        RespConnection c = pool.borrow(OP_SIZE, key);
        boolean clean = false;
        try {
            boolean asked = asking(c);
            c.writer().array(2).raw(STRLEN).bulk(key);
            asking(c);
            c.writer().array(2).raw(EXISTS).bulk(key).flush();
            skipAsking(c, asked);
            long len = c.reader().readInteger();
            String lenError = len == RespReader.REPLY_ERROR ? c.reader().lastError() : null;
            skipAsking(c, asked);
            long exists = c.reader().readInteger();
            clean = true;
            if (lenError != null) {
                throw serverError(c, OP_SIZE, key, lenError);
            }
            if (exists == RespReader.REPLY_ERROR) {
                throw replyError(c, OP_SIZE, key);
            }
            return len > 0 ? len : exists > 0 ? 0 : -1;
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public boolean remove(String key) {
        checkKey(OP_REMOVE, key);
        RespConnection c = pool.borrow(OP_REMOVE, key);
        boolean clean = false;
        try {
            boolean asked = asking(c);
            c.writer().array(2).raw(UNLINK).bulk(key).flush();
            skipAsking(c, asked);
            long r = c.reader().readInteger();
            clean = true;
            if (r == RespReader.REPLY_ERROR) {
                throw replyError(c, OP_REMOVE, key);
            }
            return r > 0;
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        checkBatch(OP_PUT_BATCH, keys, count, values.length, stored.length);
        for (int i = 0; i < count; i++) {
            checkPut(OP_PUT_BATCH, keys[i], values[i]);
        }
        if (count == 0) {
            return;
        }
        long ttl = ttl(options);
        RespConnection c = pool.borrow(OP_PUT_BATCH, keys[0]);
        boolean clean = false;
        try {
            for (int i = 0; i < count; i++) {
                writeSet(c.writer(), keys[i], values[i], ttl, options.ifAbsent());
            }
            c.writer().flush();
            int failed = -1;
            String error = null;
            for (int i = 0; i < count; i++) {
                long r = c.reader().readStatus();
                stored[i] = r == 1;
                if (r == RespReader.REPLY_ERROR && failed < 0) {
                    failed = i;
                    error = c.reader().lastError();
                }
            }
            clean = true;
            if (failed >= 0) {
                throw serverError(c, OP_PUT_BATCH, keys[failed], error);
            }
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        checkBatch(OP_GET_BATCH, keys, count, dsts.length, results.length);
        for (int i = 0; i < count; i++) {
            checkKey(OP_GET_BATCH, keys[i]);
            checkWritable(OP_GET_BATCH, keys[i], dsts[i]);
        }
        if (count == 0) {
            return;
        }
        readReplies(sendGets(keys, count), keys, dsts, count, results);
    }

    @Override
    public StoreRead newRead() {
        return new PipelinedRead();
    }

    /** {@inheritDoc} The GETs go out on a connection of the pool, which the read holds until it is awaited. */
    @Override
    public void sendGetIntoBatch(String[] keys, MemorySegment[] dsts, int count, StoreRead read) {
        PipelinedRead r = (PipelinedRead) SentBatch.free(read, this);
        checkBatch(OP_GET_BATCH, keys, count, dsts.length, count);
        for (int i = 0; i < count; i++) {
            checkKey(OP_GET_BATCH, keys[i]);
            checkWritable(OP_GET_BATCH, keys[i], dsts[i]);
        }
        r.connection = count == 0 ? null : sendGets(keys, count);
        r.sent(keys, dsts, count);
    }

    /** A batch of GETs sent on a borrowed connection and not yet read. */
    private final class PipelinedRead extends SentBatch {
        private RespConnection connection;

        PipelinedRead() {
            super(ValkeyStore.this);
        }

        @Override
        void read(long[] results) {
            RespConnection c = connection;
            connection = null;
            if (c != null) {
                readReplies(c, keys, dsts, count, results);
            }
        }
    }

    /** Borrows a connection and sends a GET per key in one write; on a failure the connection is discarded. */
    private RespConnection sendGets(String[] keys, int count) {
        RespConnection c = pool.borrow(OP_GET_BATCH, keys[0]);
        boolean sent = false;
        try {
            for (int i = 0; i < count; i++) {
                c.writer().array(2).raw(GET).bulk(keys[i]);
            }
            c.writer().flush();
            sent = true;
            return c;
        } finally {
            if (!sent) {
                pool.release(c, false);
            }
        }
    }

    /** Reads the replies of {@link #sendGets} in order, then gives the connection back; throws the first error. */
    private void readReplies(RespConnection c, String[] keys, MemorySegment[] dsts, int count, long[] results) {
        boolean clean = false;
        try {
            int failed = -1;
            String error = null;
            for (int i = 0; i < count; i++) {
                long r = c.reader().readBulkInto(dsts[i]);
                results[i] = r;
                if (r == RespReader.REPLY_ERROR && failed < 0) {
                    failed = i;
                    error = c.reader().lastError();
                }
            }
            clean = true;
            if (failed >= 0) {
                throw serverError(c, OP_GET_BATCH, keys[failed], error);
            }
        } finally {
            pool.release(c, clean);
        }
    }

    @Override
    public int removeBatch(String[] keys, int count) {
        checkBatch(OP_REMOVE_BATCH, keys, count, count, count);
        for (int i = 0; i < count; i++) {
            checkKey(OP_REMOVE_BATCH, keys[i]);
        }
        if (count == 0) {
            return 0;
        }
        RespConnection c = pool.borrow(OP_REMOVE_BATCH, keys[0]);
        boolean clean = false;
        try {
            for (int i = 0; i < count; i++) {
                c.writer().array(2).raw(UNLINK).bulk(keys[i]);
            }
            c.writer().flush();
            int removed = 0;
            int failed = -1;
            String error = null;
            for (int i = 0; i < count; i++) {
                long r = c.reader().readInteger();
                if (r == RespReader.REPLY_ERROR) {
                    if (failed < 0) {
                        failed = i;
                        error = c.reader().lastError();
                    }
                } else if (r > 0) {
                    removed++;
                }
            }
            clean = true;
            if (failed >= 0) {
                throw serverError(c, OP_REMOVE_BATCH, keys[failed], error);
            }
            return removed;
        } finally {
            pool.release(c, clean);
        }
    }

    /** PING, then INFO server: names the server's version and mode, the protocol and the limits in use. */
    @Override
    public String healthCheck() {
        RespConnection c = pool.borrow("healthCheck", null);
        boolean clean = false;
        try {
            c.writer().array(1).raw(PING).array(2).raw(INFO).raw(SERVER).array(2).raw(INFO).bulk("memory").flush();
            long pong = c.reader().readStatus();
            String pingError = pong == RespReader.REPLY_ERROR ? c.reader().lastError() : null;
            String info = c.reader().readText();
            String memory = c.reader().readText();
            clean = true;
            if (pingError != null) {
                throw serverError(c, "healthCheck", null, pingError);
            }
            if (info == null) {
                throw replyError(c, "healthCheck", null);
            }
            String name = infoField(info, "server_name");
            String version = infoField(info, "valkey_version");
            if (version == null) {
                version = infoField(info, "redis_version");
            }
            String mode = infoField(info, "server_mode");
            if (mode == null) {
                mode = infoField(info, "redis_mode");
            }
            String maxmemory = memory == null ? null : infoField(memory, "maxmemory");
            String used = memory == null ? null : infoField(memory, "used_memory");
            String limit = maxmemory == null ? "unknown" : "0".equals(maxmemory) ? "unlimited" : maxmemory + " bytes";
            String warning = "noeviction".equals(maxmemoryPolicy)
                    ? ". WARNING: maxmemory-policy noeviction makes a full server refuse every put (STORE_FULL); a KV "
                    + "cache wants allkeys-lru, or volatile-lru with ttl= set" : "";
            return uri.masked() + " answered PING: " + (name == null ? "redis" : name) + " " + version + ", mode "
                    + mode + ", RESP" + c.protocol() + ", proto-max-bulk-len " + maxValueBytes + " bytes, used_memory "
                    + used + " bytes, maxmemory " + limit + ", maxmemory-policy " + maxmemoryPolicy + warning;
        } finally {
            pool.release(c, clean);
        }
    }

    private static String infoField(String info, String name) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(name + ":")) {
                return line.substring(name.length() + 1).trim();
            }
        }
        return null;
    }

    @Override
    public void close() {
        List<ValkeySubscription> open;
        synchronized (subscriptions) {
            open = List.copyOf(subscriptions);
        }
        open.forEach(ValkeySubscription::close);
        pool.close();
    }

    /** Writes ASKING before the next command when a cluster store follows an ASK redirect on this thread. */
    private boolean asking(RespConnection c) {
        if (clusterNode && ClusterAsking.active()) {
            c.writer().array(1).raw(ASKING);
            return true;
        }
        return false;
    }

    /** Reads the +OK of an ASKING; an error here resurfaces in the reply of the command after it. */
    private static void skipAsking(RespConnection c, boolean asked) {
        if (asked) {
            c.reader().readStatus();
        }
    }

    /** CLUSTER SLOTS as a tree: per range, its first and last slot, then the master's [host, port, id, ...]. */
    List<Object> clusterSlots() {
        RespConnection c = pool.borrow("clusterSlots", null);
        boolean clean = false;
        try {
            c.reader().clearError();
            c.writer().array(2).raw(CLUSTER).raw(SLOTS).flush();
            Object tree = c.reader().readTree();
            clean = true;
            if (tree instanceof List<?> list) {
                @SuppressWarnings("unchecked")
                List<Object> l = (List<Object>) list;
                return l;
            }
            throw KVException.of(ErrorCode.STORE_ERROR, endpoint.hostPort() + " answered CLUSTER SLOTS with "
                            + (c.reader().lastError() == null ? "no list" : c.sanitize(c.reader().lastError())))
                    .store(uri.masked()).operation("clusterSlots")
                    .hint("valkey+cluster:// needs servers started with cluster-enabled yes; use valkey:// for a "
                            + "standalone server")
                    .build();
        } finally {
            pool.release(c, clean);
        }
    }

    /** The server this store talks to. */
    Endpoint endpoint() {
        return endpoint;
    }

    private static void writeSet(RespWriter w, String key, MemorySegment value, long ttl, boolean ifAbsent) {
        w.array(3 + (ttl > 0 ? 2 : 0) + (ifAbsent ? 1 : 0)).raw(SET).bulk(key).bulk(value);
        if (ttl > 0) {
            w.raw(PX).bulk(ttl);
        }
        if (ifAbsent) {
            w.raw(NX);
        }
    }

    private long ttl(PutOptions options) {
        return options.ttlMillis() > 0 ? options.ttlMillis() : defaultTtlMillis;
    }

    private void checkKey(String op, String key) {
        if (pool.isClosed()) {
            throw KVException.of(ErrorCode.CLOSED, "the store was closed").store(uri.masked()).operation(op)
                    .key(key).build();
        }
        if (key == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is null").store(uri.masked()).operation(op)
                    .build();
        }
        if (key.length() > maxKeyBytes / 3 && RespWriter.utf8Length(key) > maxKeyBytes) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a key of " + RespWriter.utf8Length(key)
                            + " UTF-8 bytes exceeds the limit of " + maxKeyBytes + " bytes")
                    .store(uri.masked()).operation(op).key(key).build();
        }
    }

    private void checkPut(String op, String key, MemorySegment value) {
        checkKey(op, key);
        if (value == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the value is null").store(uri.masked())
                    .operation(op).key(key).build();
        }
        if (value.byteSize() > maxValueBytes) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "a value of " + value.byteSize() + " bytes exceeds "
                            + endpoint.hostPort() + "'s proto-max-bulk-len of " + maxValueBytes + " bytes")
                    .store(uri.masked()).operation(op).key(key)
                    .hint("split the object, or raise proto-max-bulk-len on the server (CONFIG SET "
                            + "proto-max-bulk-len) and reopen the store")
                    .build();
        }
    }

    private void checkWritable(String op, String key, MemorySegment dst) {
        if (dst == null || dst.isReadOnly()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the destination is " + (dst == null ? "null"
                    : "read-only")).store(uri.masked()).operation(op).key(key).build();
        }
    }

    private void checkBatch(String op, String[] keys, int count, int valuesLength, int resultsLength) {
        if (count < 0 || count > keys.length || count > valuesLength || count > resultsLength) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "count " + count + " is negative or exceeds an array"
                            + " (keys " + keys.length + ", values " + valuesLength + ", results " + resultsLength
                            + ")")
                    .store(uri.masked()).operation(op).build();
        }
    }

    private RuntimeException replyError(RespConnection c, String op, String key) {
        return serverError(c, op, key, c.reader().lastError());
    }

    /** Maps a server error reply to an error code; the connection stays usable. */
    private RuntimeException serverError(RespConnection c, String op, String key, String message) {
        String msg = c.sanitize(message);
        String upper = msg.toUpperCase(Locale.ROOT);
        if (clusterNode && (upper.startsWith("MOVED ") || upper.startsWith("ASK "))) {
            Redirect r = Redirect.parse(msg, endpoint.host());
            if (r != null) {
                return r;
            }
        }
        String hp = endpoint.hostPort();
        KVException.Builder b;
        if (upper.startsWith("OOM")) {
            b = KVException.of(ErrorCode.STORE_FULL, hp + " is out of memory and refused the write (" + msg
                            + "); maxmemory-policy is " + maxmemoryPolicy)
                    .hint("with maxmemory-policy noeviction the server refuses writes at maxmemory: use allkeys-lru"
                            + " (or volatile-lru with ttl=), raise maxmemory, or remove entries");
        } else if (upper.startsWith("NOAUTH")) {
            b = KVException.of(ErrorCode.AUTH_FAILED, hp + " refused the command: " + msg)
                    .hint("the server requires a password: valkey://[user]:password@host:port");
        } else if (upper.startsWith("WRONGPASS") || upper.startsWith("NOPERM")) {
            b = KVException.of(ErrorCode.AUTH_FAILED, hp + " refused the command: " + msg)
                    .hint("check the password and the ACL rules of the user in the store URI");
        } else if (upper.startsWith("LOADING") || upper.startsWith("BUSY") || upper.startsWith("TRYAGAIN")
                || upper.startsWith("MASTERDOWN")) {
            b = KVException.of(ErrorCode.BUSY, hp + " is busy: " + msg).hint("retry after a back-off");
        } else if (clusterNode && upper.startsWith("CLUSTERDOWN")) {
            b = KVException.of(ErrorCode.BUSY, hp + " says the cluster is down: " + msg)
                    .hint("a master failed and no replica has taken over its slots yet (that takes about "
                            + "cluster-node-timeout), or slots are unassigned; retry after a back-off, and check "
                            + "CLUSTER INFO if it persists");
        } else if (upper.startsWith("MOVED") || upper.startsWith("ASK") || upper.startsWith("CROSSSLOT")
                || upper.startsWith("CLUSTERDOWN")) {
            b = KVException.of(ErrorCode.STORE_ERROR, hp + " is a cluster node: " + msg)
                    .hint("valkey:// talks to one standalone server; this server runs in cluster mode");
        } else if (upper.startsWith("READONLY")) {
            b = KVException.of(ErrorCode.STORE_ERROR, hp + " is a read-only replica: " + msg)
                    .hint("point the URI at the primary");
        } else if (upper.startsWith("WRONGTYPE")) {
            b = KVException.of(ErrorCode.STORE_ERROR, hp + " holds a non-string value under this key: " + msg)
                    .hint("another application uses the same key space; give kvconnector its own key prefix or "
                            + "database");
        } else {
            b = KVException.of(ErrorCode.STORE_ERROR, hp + " answered an error: " + msg);
        }
        return b.store(uri.masked()).operation(op).key(key).build();
    }

    @Override
    public String toString() {
        return "ValkeyStore[" + uri.masked() + "]";
    }
}
