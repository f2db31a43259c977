package dev.kvconnector.lmcache.server;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmRequestHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An LMCache-protocol server speaking one protocol version (v0 or v1), embeddable in tests and tools, and the
 * engine behind {@code kvctl lmserver}.
 *
 * <p>Values live off-heap in memory from the C library's malloc ({@link dev.kvconnector.memory.NativeMemory};
 * {@code NativeHeap} says why), bounded by a capacity in bytes with least-recently-used eviction. The memory of a
 * replaced or evicted value of 64 KiB or more is kept, within the capacity, for the next PUT of the same size, so
 * that a PUT does not fault in fresh pages ({@code OffHeapLruCache} has the measurements). Each connection
 * gets one virtual thread that handles its requests in order, as the Python servers do. Behaviour where the Python
 * servers say nothing or hang:
 * <ul>
 *   <li>A payload that makes no progress for the payload timeout (default {@value #DEFAULT_PAYLOAD_TIMEOUT_MILLIS}
 *       ms; {@link StallWatchdog}) closes its connection: a PUT that announced a size and then sent nothing gives
 *       its reservation back, and the log names the client and the key.</li>
 *   <li>PUT never replies (both versions, as in LMCache). A PUT larger than the capacity, or one that cannot get
 *       memory, is read and dropped with a warning: a later GET or EXIST of its key misses.</li>
 *   <li>HEALTH on a v0 server and LIST on a v1 server reply FAIL (the Python servers never reply, leaving the
 *       client hanging); neither carries a payload, so the connection stays usable.</li>
 *   <li>An unknown command, a negative length or a key field that is not UTF-8 closes the connection: the
 *       stream's framing can no longer be trusted.</li>
 *   <li>Keys are opaque strings; unlike the Python v1 server they are not parsed as {@code CacheEngineKey}s.</li>
 *   <li>v1 replies carry location 0 (none), as the Python v1 server sends them.</li>
 * </ul>
 *
 * <pre>{@code
 * try (LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).capacityBytes(1L << 30)
 *         .build().start()) {
 *     KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?protocol=v1");
 * }
 * }</pre>
 */
public final class LmCacheServer implements AutoCloseable {
    // Over 400 lines: the lifecycle, the per-connection protocol handler and the builder share the server's state;
    // the store (OffHeapLruCache) and the stall timing (StallWatchdog) live apart.
    /** Default capacity: 1 GiB. */
    public static final long DEFAULT_CAPACITY_BYTES = 1L << 30;
    /**
     * Default payload timeout, in ms: twice the {@code lm://} client's default {@code timeout} of 5 s, so a client
     * that makes no progress this long has given up itself.
     */
    public static final long DEFAULT_PAYLOAD_TIMEOUT_MILLIS = 10_000;
    /** Default bind address: loopback only. */
    public static final String DEFAULT_HOST = "127.0.0.1";

    private static final Logger LOG = LoggerFactory.getLogger(LmCacheServer.class);
    private static final int DRAIN_BUFFER_BYTES = 64 * 1024;
    private static final long JOIN_MILLIS = 5_000;

    private final String host;
    private final int requestedPort;
    private final LmProtocolVersion protocol;
    private final long capacityBytes;
    private final long payloadTimeoutMillis;
    private final NativeHeap heap = new NativeHeap();
    private final OffHeapLruCache cache;
    private final Set<SocketChannel> connections = ConcurrentHashMap.newKeySet();
    private final Set<Thread> handlers = ConcurrentHashMap.newKeySet();
    private final AtomicLong connectionIds = new AtomicLong();
    private final Object lifecycle = new Object();
    private ServerSocketChannel listener;
    private Thread acceptor;
    private StallWatchdog watchdog;
    private volatile int boundPort = -1;
    private volatile boolean running;
    private boolean stopped;

    private LmCacheServer(Builder b) {
        this.host = b.host;
        this.requestedPort = b.port;
        this.protocol = b.protocol;
        this.capacityBytes = b.capacityBytes;
        this.payloadTimeoutMillis = b.payloadTimeoutMillis;
        this.cache = new OffHeapLruCache(heap, capacityBytes);
    }

    /** Starts a builder: port 0 (a free port), protocol v1, 1 GiB, 127.0.0.1. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Binds the port and starts accepting connections. Returns this server.
     *
     * @throws KVException {@code IO_ERROR} naming host and port when the bind fails; {@code CLOSED} after stop
     */
    public LmCacheServer start() {
        synchronized (lifecycle) {
            if (stopped) {
                throw KVException.of(ErrorCode.CLOSED, "this LMCache server was stopped; build a new one").build();
            }
            if (running) {
                return this;
            }
            try {
                listener = ServerSocketChannel.open();
                listener.bind(new InetSocketAddress(host, requestedPort), 128);
            } catch (IOException e) {
                closeQuietly(listener);
                throw KVException.of(ErrorCode.IO_ERROR, "cannot listen on " + host + ":" + requestedPort)
                        .operation("lmserver start")
                        .hint("is the port in use, or the host not an address of this machine? port 0 picks a free "
                                + "port")
                        .cause(e).build();
            }
            try {
                boundPort = ((InetSocketAddress) listener.getLocalAddress()).getPort();
            } catch (IOException e) {
                closeQuietly(listener);
                throw KVException.of(ErrorCode.IO_ERROR, "cannot read the bound port of " + host + ":"
                        + requestedPort).operation("lmserver start").cause(e).build();
            }
            running = true;
            watchdog = new StallWatchdog(payloadTimeoutMillis, "lmserver-watchdog-" + boundPort());
            acceptor = Thread.ofVirtual().name("lmserver-accept-" + boundPort()).start(this::acceptLoop);
            LOG.info("LMCache {} server listening on {}:{}, capacity {} bytes, payload timeout {} ms",
                    protocol.label(), host, boundPort(), capacityBytes, payloadTimeoutMillis);
            return this;
        }
    }

    /** The port the server listens on (the chosen one when built with port 0); -1 before start. */
    public int boundPort() {
        return boundPort;
    }

    /** The bind address. */
    public String host() {
        return host;
    }

    /** The protocol version this server speaks. */
    public LmProtocolVersion protocol() {
        return protocol;
    }

    /** The capacity in bytes. */
    public long capacityBytes() {
        return capacityBytes;
    }

    /** How long a payload may make no progress before its connection is closed, in ms. */
    public long payloadTimeoutMillis() {
        return payloadTimeoutMillis;
    }

    /** Bytes of stored values. */
    public long storedBytes() {
        return cache.storedBytes();
    }

    /** Number of stored entries. */
    public int entryCount() {
        return cache.size();
    }

    /** Entries evicted to make room since start. */
    public long evictions() {
        return cache.evictions();
    }

    /**
     * Native bytes allocated and not freed: values stored, in flight, or still being sent, and {@link #keptBytes()}.
     * 0 after stop.
     */
    public long nativeBytesInUse() {
        return heap.bytesInUse();
    }

    /**
     * Bytes of replaced or evicted values' memory kept for the next PUT of the same size; counted against the
     * capacity and dropped first when a PUT needs room.
     */
    public long keptBytes() {
        return cache.keptBytes();
    }

    /** Open client connections. */
    public int connectionCount() {
        return connections.size();
    }

    /**
     * Stops accepting, closes every connection, waits for their threads (up to 5 s each) and frees every value.
     * Idempotent.
     */
    public void stop() {
        Thread acceptThread;
        StallWatchdog dog;
        synchronized (lifecycle) {
            if (stopped) {
                return;
            }
            stopped = true;
            running = false;
            closeQuietly(listener);
            acceptThread = acceptor;
            dog = watchdog;
        }
        join(acceptThread);
        for (SocketChannel ch : connections) {
            closeQuietly(ch);
        }
        for (Thread t : handlers) {
            join(t);
        }
        if (dog != null) {
            dog.close();
        }
        cache.clear();
        LOG.info("LMCache {} server on {}:{} stopped", protocol.label(), host, boundPort);
    }

    /** Same as {@link #stop()}. */
    @Override
    public void close() {
        stop();
    }

    private void acceptLoop() {
        while (running) {
            SocketChannel ch;
            try {
                ch = listener.accept();
            } catch (IOException e) {
                if (running) {
                    LOG.warn("LMCache server on {}:{} stopped accepting: {}", host, boundPort, e.toString());
                }
                return;
            }
            try {
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException e) {
                closeQuietly(ch);
                continue;
            }
            connections.add(ch);
            Thread t = Thread.ofVirtual().name("lmserver-conn-" + connectionIds.incrementAndGet())
                    .unstarted(() -> serve(ch));
            handlers.add(t);
            t.start();
        }
    }

    private void serve(SocketChannel ch) {
        String peer = peerOf(ch);
        StallWatchdog.Watch watch = watchdog.watch(ch);
        try {
            new Connection(ch, peer, watch).run();
        } catch (ClosedChannelException e) {
            if (watch.stalled()) {
                LOG.warn("closed the connection from {}: the {} made no progress for {} ms after {} bytes; what it "
                                + "held is given back", peer, watch.transfer(), payloadTimeoutMillis,
                        watch.bytesSoFar());
            } else {
                LOG.debug("connection from {} closed", peer);
            }
        } catch (IOException e) {
            LOG.debug("connection from {} ended: {}", peer, e.toString());
        } catch (RuntimeException e) {
            LOG.warn("closing connection from {}: {}", peer, e.getMessage());
        } finally {
            watchdog.unwatch(watch);
            closeQuietly(ch);
            connections.remove(ch);
            handlers.remove(Thread.currentThread());
        }
    }

    /** One client connection's state: its header buffers, reused for every request. */
    private final class Connection {
        private final SocketChannel ch;
        private final String peer;
        private final StallWatchdog.Watch watch;
        private final ByteBuffer in = ByteBuffer.allocateDirect(protocol.requestHeaderBytes());
        private final ByteBuffer out = ByteBuffer.allocateDirect(protocol.replyHeaderBytes());
        private final LmRequestHeader request = new LmRequestHeader();
        private final LmReplyHeader reply = new LmReplyHeader();
        private final ByteBuffer[] headerAndPayload = new ByteBuffer[2];
        private ByteBuffer drain;

        Connection(SocketChannel ch, String peer, StallWatchdog.Watch watch) {
            this.ch = ch;
            this.peer = peer;
            this.watch = watch;
        }

        void run() throws IOException {
            while (readHeader()) {
                request.decode(protocol, in);
                if (!handle()) {
                    return;
                }
            }
        }

        /** Reads one request header; false on a clean end of stream between requests. */
        private boolean readHeader() throws IOException {
            in.clear();
            while (in.hasRemaining()) {
                if (ch.read(in) < 0) {
                    if (in.position() == 0) {
                        return false;
                    }
                    throw new EOFException("end of stream after " + in.position() + " of "
                            + protocol.requestHeaderBytes() + " header bytes");
                }
            }
            return true;
        }

        /** Handles the decoded request; false when the connection must close. */
        private boolean handle() throws IOException {
            switch (request.command()) {
                case LmWire.PUT -> {
                    return put();
                }
                case LmWire.GET -> get();
                case LmWire.EXIST -> reply(cache.contains(request.key()) ? LmWire.SUCCESS : LmWire.FAIL);
                case LmWire.LIST -> {
                    if (protocol.servesList()) {
                        list();
                    } else {
                        reply(LmWire.FAIL);
                    }
                }
                case LmWire.HEALTH -> reply(protocol.servesHealth() ? LmWire.SUCCESS : LmWire.FAIL);
                default -> {
                    LOG.warn("closing connection from {}: unknown command code {} (length {}); a {} server knows "
                                    + "PUT=1 GET=2 EXIST=3 LIST=4 HEALTH=5", peer, request.command(),
                            request.length(), protocol.label());
                    return false;
                }
            }
            return true;
        }

        private boolean put() throws IOException {
            int length = request.length();
            String key = request.key();
            if (length < 0) {
                LOG.warn("closing connection from {}: PUT of key {} with negative length {}", peer, key, length);
                return false;
            }
            MemorySegment data;
            try {
                data = cache.reserve(length);
            } catch (KVException e) {
                if (e.code() != ErrorCode.STORE_FULL) {
                    throw e;
                }
                LOG.warn("dropping PUT from {} of key {}: {}", peer, key, e.getMessage());
                drain(length);
                return true;
            }
            if (data == null) {
                long reserved = cache.reservedBytes();
                if (length > capacityBytes || reserved == 0) {
                    LOG.warn("dropping PUT from {} of key {}: {} bytes exceed the capacity of {} bytes", peer, key,
                            length, capacityBytes);
                } else {
                    LOG.warn("dropping PUT from {} of key {}: {} bytes do not fit beside the {} bytes reserved by "
                                    + "PUTs still receiving their payload (capacity {} bytes); a stalled PUT holds its "
                                    + "reservation for at most the payload timeout of {} ms", peer, key, length,
                            reserved, capacityBytes, payloadTimeoutMillis);
                }
                drain(length);
                return true;
            }
            boolean received = false;
            watch.begin("PUT payload of key " + key + " (" + length + " bytes)");
            try {
                ByteBuffer payload = data.asByteBuffer();
                while (payload.hasRemaining()) {
                    if (ch.read(payload) < 0) {
                        throw new EOFException("end of stream after " + payload.position() + " of " + length
                                + " payload bytes of PUT " + key);
                    }
                    watch.progress(payload.position());
                }
                received = true;
                watch.end();
            } finally {
                if (!received) {
                    cache.cancel(data);
                }
            }
            cache.commit(key, data, request.meta());
            return true;
        }

        private void get() throws IOException {
            OffHeapLruCache.Value v = cache.acquire(request.key());
            if (v == null) {
                reply(LmWire.FAIL);
                return;
            }
            try {
                reply.set(LmWire.SUCCESS, (int) v.data.byteSize(), v.meta, LmWire.LOCATION_NONE)
                        .encode(protocol, out);
                watch.begin("GET reply of key " + request.key() + " (" + v.data.byteSize() + " bytes)");
                writeWithPayload(v.data.asByteBuffer());
                watch.end();
            } finally {
                cache.release(v);
            }
        }

        private void list() throws IOException {
            ByteBuffer payload = ByteBuffer.wrap(String.join("\n", cache.keys()).getBytes(StandardCharsets.UTF_8));
            reply.set(LmWire.SUCCESS, payload.remaining()).encode(protocol, out);
            writeWithPayload(payload);
        }

        private void reply(int code) throws IOException {
            reply.set(code, 0).encode(protocol, out);
            while (out.hasRemaining()) {
                ch.write(out);
            }
        }

        /** Writes the reply header and its payload with gathering writes: one system call for small values. */
        private void writeWithPayload(ByteBuffer payload) throws IOException {
            headerAndPayload[0] = out;
            headerAndPayload[1] = payload;
            try {
                while (payload.hasRemaining() || out.hasRemaining()) {
                    ch.write(headerAndPayload);
                    watch.progress(payload.position());
                }
            } finally {
                headerAndPayload[1] = null;
            }
        }

        private void drain(long bytes) throws IOException {
            if (drain == null) {
                drain = ByteBuffer.allocateDirect(DRAIN_BUFFER_BYTES);
            }
            watch.begin("dropped PUT payload of key " + request.key() + " (" + bytes + " bytes)");
            long left = bytes;
            while (left > 0) {
                drain.clear().limit((int) Math.min(left, DRAIN_BUFFER_BYTES));
                int n = ch.read(drain);
                if (n < 0) {
                    throw new EOFException("end of stream with " + left + " bytes of a dropped PUT unread");
                }
                left -= n;
                watch.progress(bytes - left);
            }
            watch.end();
        }
    }

    /** The client's {@code address:port}. */
    private static String peerOf(SocketChannel ch) {
        try {
            return ch.getRemoteAddress() instanceof InetSocketAddress a ? a.getHostString() + ":" + a.getPort()
                    : String.valueOf(ch.getRemoteAddress());
        } catch (IOException e) {
            return "an unknown peer";
        }
    }

    private static void join(Thread t) {
        if (t == null) {
            return;
        }
        try {
            t.join(JOIN_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(java.io.Closeable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (IOException e) {
            LOG.debug("close failed: {}", e.toString());
        }
    }

    /** Configures an {@link LmCacheServer}. */
    public static final class Builder {
        private String host = DEFAULT_HOST;
        private int port;
        private LmProtocolVersion protocol = LmProtocolVersion.V1;
        private long capacityBytes = DEFAULT_CAPACITY_BYTES;
        private long payloadTimeoutMillis = DEFAULT_PAYLOAD_TIMEOUT_MILLIS;

        private Builder() {
        }

        /**
         * How long a PUT's payload or a GET's reply may make no progress before the connection is closed and what
         * the transfer held is given back, in ms; default {@value LmCacheServer#DEFAULT_PAYLOAD_TIMEOUT_MILLIS}.
         */
        public Builder payloadTimeoutMillis(long millis) {
            if (millis <= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "payload timeout " + millis + " ms is not above 0")
                        .build();
            }
            this.payloadTimeoutMillis = millis;
            return this;
        }

        /** The address to bind; default 127.0.0.1. */
        public Builder host(String bindHost) {
            this.host = Objects.requireNonNull(bindHost, "host");
            return this;
        }

        /** The TCP port; 0 (the default) picks a free port, see {@link #boundPort()}. */
        public Builder port(int tcpPort) {
            if (tcpPort < 0 || tcpPort > 65535) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "port " + tcpPort + " is out of range 0-65535")
                        .build();
            }
            this.port = tcpPort;
            return this;
        }

        /** The protocol version to speak; default v1. */
        public Builder protocol(LmProtocolVersion version) {
            this.protocol = Objects.requireNonNull(version, "protocol");
            return this;
        }

        /** The most bytes of values to hold; default 1 GiB. */
        public Builder capacityBytes(long bytes) {
            if (bytes < 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "capacity " + bytes + " bytes is negative").build();
            }
            this.capacityBytes = bytes;
            return this;
        }

        /** Builds a server; call {@link LmCacheServer#start()}. */
        public LmCacheServer build() {
            return new LmCacheServer(this);
        }
    }
}
