package dev.kvconnector.lmcache.client;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * The {@code lm://host:port} store: an LMCache server reached over a pool of {@link LmConnection}s.
 *
 * <p>URI options:
 * <table>
 *   <caption>lm:// options</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>protocol</td><td>v1</td><td>{@code v0} (2024 server) or {@code v1} (lmcache.v1.server)</td></tr>
 *   <tr><td>timeout</td><td>5s</td><td>longest wait for any byte to move, and for a free pooled connection</td></tr>
 *   <tr><td>connect-timeout</td><td>the timeout</td><td>longest wait for a TCP connection</td></tr>
 *   <tr><td>pool</td><td>8</td><td>most connections open at once; callers beyond it wait</td></tr>
 *   <tr><td>max-reply</td><td>1GiB</td><td>largest reply payload accepted, in bytes</td></tr>
 *   <tr><td>confirm</td><td>true</td><td>follow each PUT with an EXIST on the same connection</td></tr>
 * </table>
 *
 * <p>What the protocol cannot do, and how this store copes:
 * <ul>
 *   <li><b>PUT has no reply.</b> With {@code confirm=true} each put is followed by an EXIST on the same
 *       connection; the server handles a connection's requests in order, so a SUCCESS proves the value is stored
 *       and visible to every other connection, and a FAIL (the server dropped a value larger than its capacity)
 *       becomes a {@code STORE_FULL} error. The price is one round trip per put. With {@code confirm=false} a put
 *       returns once its bytes are in the socket: a failure surfaces on a later request of that connection, and
 *       a get on another connection may run before the server has stored the value.</li>
 *   <li><b>No delete.</b> {@link #remove} fails with {@code UNSUPPORTED}; entries leave by the server's LRU
 *       eviction.</li>
 *   <li><b>No size request.</b> {@link #size} sends a GET and reads and drops the payload (up to 8 MiB; above
 *       that it discards the connection instead, which is cheaper than moving the value). Use {@link #exists} when
 *       presence is all you need: it is one EXIST.</li>
 *   <li><b>No TTL, no conditional put.</b> TTLs are ignored (entries live until evicted). {@code ifAbsent} is an
 *       EXIST followed by a PUT: two clients racing on one key may both store.</li>
 * </ul>
 * Batches ({@link StoreCapability#BATCH}) are pipelined on one connection, one round trip per window of 256.
 * A connection that fails in any way is discarded, never returned to the pool. A request that fails because a
 * pooled connection went stale (the server restarted) is retried once on a fresh connection.
 */
public final class LmStore implements KVStore {
    /** The port used when the URI names none (LMCache's examples use 65432). */
    public static final int DEFAULT_PORT = 65432;
    /** Option names accepted in the URI. */
    public static final Set<String> OPTIONS = Set.of("protocol", "timeout", "connect-timeout", "pool", "max-reply",
            "confirm");
    private static final long DEFAULT_TIMEOUT_MILLIS = 5_000;
    private static final int DEFAULT_POOL = 8;
    private static final long DEFAULT_MAX_REPLY_BYTES = 1L << 30;
    /**
     * Requests in flight per batch window: 256 v1 GET headers are 47 KiB, well inside the socket buffers, so
     * neither side blocks writing while the other is still writing too.
     */
    private static final int PIPELINE_DEPTH = 256;

    /** One request on a connection. */
    @FunctionalInterface
    private interface Request<T> {
        T on(LmConnection c);
    }

    private final String uri;
    private final String host;
    private final int port;
    private final LmProtocolVersion protocol;
    private final long timeoutMillis;
    private final long connectTimeoutMillis;
    private final long maxReplyBytes;
    private final boolean confirm;
    private final int poolSize;
    private final Semaphore permits;
    private final ConcurrentLinkedDeque<LmConnection> idle = new ConcurrentLinkedDeque<>();
    private volatile boolean closed;

    /**
     * Opens a store from a parsed {@code lm://} URI. No connection is made until the first request.
     *
     * @throws KVException {@code INVALID_URI} for an unknown option or a bad value, naming it
     */
    public LmStore(StoreUri uri) {
        uri.requireKnownParams(OPTIONS).requireNoUserInfo();
        this.uri = uri.masked();
        StoreUri.HostPort hp = uri.singleHost(DEFAULT_PORT);
        this.host = hp.host();
        this.port = hp.port();
        String version = uri.param("protocol");
        try {
            this.protocol = version == null ? LmProtocolVersion.V1 : LmProtocolVersion.parse(version);
        } catch (KVException e) {
            throw invalidUri("option protocol=" + version + " is neither v0 nor v1");
        }
        this.timeoutMillis = uri.durationMillisParam("timeout", DEFAULT_TIMEOUT_MILLIS);
        this.connectTimeoutMillis = uri.durationMillisParam("connect-timeout", timeoutMillis);
        this.poolSize = uri.intParam("pool", DEFAULT_POOL);
        this.maxReplyBytes = uri.sizeParam("max-reply", DEFAULT_MAX_REPLY_BYTES);
        this.confirm = uri.boolParam("confirm", true);
        if (timeoutMillis <= 0 || connectTimeoutMillis <= 0) {
            throw invalidUri("timeout and connect-timeout must be above 0 ms");
        }
        if (poolSize < 1) {
            throw invalidUri("option pool=" + poolSize + " must be at least 1");
        }
        if (maxReplyBytes < 0 || maxReplyBytes > Integer.MAX_VALUE) {
            throw invalidUri("option max-reply=" + maxReplyBytes + " must be within 0.." + Integer.MAX_VALUE
                    + " bytes (the protocol's lengths are int32)");
        }
        this.permits = new Semaphore(poolSize, true);
    }

    @Override
    public String uri() {
        return uri;
    }

    /** The protocol version this store speaks. */
    public LmProtocolVersion protocol() {
        return protocol;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return EnumSet.of(StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.BATCH);
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        if (options.ifAbsent() && exists(key)) {
            return false;
        }
        long size = value.byteSize();
        put(key, value, size <= Integer.MAX_VALUE ? LmObjectMeta.bytes((int) size) : LmObjectMeta.NONE);
        return true;
    }

    /**
     * Stores {@code value} with the given v1 metadata (format, dtype, shape; ignored by v0), so that LMCache
     * instances reading the same server see a tensor. Confirmed as described in the class documentation.
     *
     * @throws KVException {@code STORE_FULL} when the confirming EXIST finds the value missing
     */
    public void put(String key, MemorySegment value, LmObjectMeta meta) {
        boolean stored = call("put", key, c -> {
            c.put(key, value, meta);
            return !confirm || c.exist(key);
        });
        if (!stored) {
            throw KVException.of(ErrorCode.STORE_FULL, "the LMCache server at " + host + ":" + port
                            + " did not keep a value of " + value.byteSize() + " bytes")
                    .store(uri).operation("put").key(key)
                    .hint("the value is likely larger than the server's capacity (kvctl lmserver --capacity), or "
                            + "was evicted at once by other writers")
                    .build();
        }
    }

    /**
     * Pipelines the puts on one connection, {@value #PIPELINE_DEPTH} at a time: all PUTs, then (with
     * {@code confirm}) all EXISTs, then their replies, so a window costs one round trip. {@code ifAbsent} falls
     * back to one put at a time. A value the server did not keep is reported once the whole batch was sent.
     *
     * @throws KVException {@code STORE_FULL} naming the first key the server did not keep
     */
    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        if (options.ifAbsent()) {
            KVStore.super.putBatch(keys, values, count, options, stored);
            return;
        }
        int missing = -1;
        for (int from = 0; from < count; from += PIPELINE_DEPTH) {
            int start = from;
            int end = Math.min(count, from + PIPELINE_DEPTH);
            call("putBatch", keys[start], c -> pipelined(c, () -> {
                for (int i = start; i < end; i++) {
                    long size = values[i].byteSize();
                    c.put(keys[i], values[i], size <= Integer.MAX_VALUE ? LmObjectMeta.bytes((int) size)
                            : LmObjectMeta.NONE);
                }
                if (confirm) {
                    for (int i = start; i < end; i++) {
                        c.sendExist(keys[i]);
                    }
                }
                for (int i = start; i < end; i++) {
                    stored[i] = !confirm || c.readExistReply(keys[i]);
                }
            }));
            for (int i = start; i < end && missing < 0; i++) {
                if (!stored[i]) {
                    missing = i;
                }
            }
        }
        if (missing >= 0) {
            throw KVException.of(ErrorCode.STORE_FULL, "the LMCache server at " + host + ":" + port
                            + " did not keep batch value " + missing + " of " + count + " ("
                            + values[missing].byteSize() + " bytes)")
                    .store(uri).operation("putBatch").key(keys[missing])
                    .hint("the value is likely larger than the server's capacity, or the batch is larger than the "
                            + "capacity and evicted its own first values")
                    .build();
        }
    }

    /** Pipelines the GETs on one connection, {@value #PIPELINE_DEPTH} at a time: one round trip per window. */
    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        for (int from = 0; from < count; from += PIPELINE_DEPTH) {
            int start = from;
            int end = Math.min(count, from + PIPELINE_DEPTH);
            call("getBatch", keys[start], c -> pipelined(c, () -> {
                for (int i = start; i < end; i++) {
                    c.sendGet(keys[i], dsts[i]);
                }
                for (int i = start; i < end; i++) {
                    results[i] = c.readGetReply(keys[i], dsts[i], i == end - 1);
                }
            }));
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        return call("get", key, c -> c.get(key, dst));
    }

    /**
     * Like {@link #getInto(String, MemorySegment)}, and copies the reply header (with v1's format, dtype and
     * shape) into {@code replyOut}.
     */
    public long getInto(String key, MemorySegment dst, LmReplyHeader replyOut) {
        return call("get", key, c -> {
            long r = c.get(key, dst);
            LmReplyHeader h = c.lastReply();
            replyOut.set(h.code(), h.length(), h.meta(), h.location());
            return r;
        });
    }

    @Override
    public long size(String key) {
        return call("size", key, c -> c.size(key));
    }

    @Override
    public boolean exists(String key) {
        return call("exists", key, c -> c.exist(key));
    }

    /** Always fails: the LMCache protocol has no delete. */
    @Override
    public boolean remove(String key) {
        checkOpen("remove", key);
        throw KVException.of(ErrorCode.UNSUPPORTED, "the LMCache server protocol has no delete request")
                .store(uri).operation("remove").key(key)
                .hint("entries leave an LMCache server by its LRU eviction; use a store with remove (memory:, "
                        + "valkey://) where drop-after-read matters")
                .build();
    }

    /**
     * The keys on a v0 server (LIST), for tools and tests.
     *
     * @throws KVException {@code UNSUPPORTED} for protocol v1, which has no LIST
     */
    public List<String> listKeys() {
        return call("list", null, LmConnection::list);
    }

    /** v1: a HEALTH request that must answer SUCCESS; v0, which has no HEALTH: an EXIST round trip. */
    @Override
    public String healthCheck() {
        if (protocol.servesHealth()) {
            boolean ok = call("health", null, LmConnection::health);
            if (!ok) {
                throw KVException.of(ErrorCode.STORE_ERROR, "the LMCache server at " + host + ":" + port
                        + " answered HEALTH with FAIL").store(uri).operation("health")
                        .hint("check the server's log; is it a v0 server (protocol=v0)?").build();
            }
            return uri + " answered HEALTH (protocol v1)";
        }
        call("health", null, c -> c.exist(LmConnection.PROBE_KEY));
        return uri + " answered EXIST (protocol v0 has no HEALTH)";
    }

    @Override
    public void close() {
        closed = true;
        LmConnection c;
        while ((c = idle.pollFirst()) != null) {
            c.close();
        }
    }

    private <T> T call(String op, String key, Request<T> request) {
        acquirePermit(op, key);
        try {
            LmConnection c = idle.pollFirst();
            boolean reused = c != null;
            if (c == null) {
                c = connect();
            }
            try {
                return request.on(c);
            } catch (KVException e) {
                if (!reused || e.code() != ErrorCode.STORE_UNREACHABLE) {
                    throw e;
                }
                c.close();
                c = connect();
                return request.on(c);
            } catch (RuntimeException e) {
                // Not one of the connection's own failures, so it may have struck mid-frame: never reuse it.
                c.close();
                throw e;
            } finally {
                recycle(c);
            }
        } finally {
            permits.release();
        }
    }

    /**
     * Runs a pipelined window. Any failure, even a refused key, may leave replies to earlier requests unread, so
     * the connection is closed rather than returned to the pool.
     */
    private static Void pipelined(LmConnection c, Runnable window) {
        try {
            window.run();
            return null;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    private void acquirePermit(String op, String key) {
        checkOpen(op, key);
        boolean got;
        try {
            got = permits.tryAcquire(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw KVException.of(ErrorCode.TIMEOUT, "interrupted while waiting for a pooled connection")
                    .store(uri).operation(op).key(key).cause(e).build();
        }
        if (!got) {
            throw KVException.of(ErrorCode.TIMEOUT, "all " + poolSize + " connections to " + host + ":" + port
                            + " stayed busy for " + timeoutMillis + " ms")
                    .store(uri).operation(op).key(key)
                    .hint("raise pool= for more concurrent callers, or check for slow transfers").build();
        }
    }

    private LmConnection connect() {
        return LmConnection.open(host, port, protocol, connectTimeoutMillis, timeoutMillis, maxReplyBytes, uri);
    }

    /** Returns a healthy connection to the idle pool; closes a broken one, or any once the store is closed. */
    private void recycle(LmConnection c) {
        if (c.isBroken() || closed) {
            c.close();
            return;
        }
        idle.offerFirst(c);
        if (closed && idle.remove(c)) {
            c.close();
        }
    }

    private void checkOpen(String op, String key) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "this lm:// store was closed").store(uri).operation(op).key(key)
                    .build();
        }
    }

    private KVException invalidUri(String detail) {
        return KVException.of(ErrorCode.INVALID_URI, detail).store(uri)
                .hint("lm://host:port?protocol=v0|v1&timeout=5s&connect-timeout=2s&pool=8&max-reply=1GiB"
                        + "&confirm=true").build();
    }
}
