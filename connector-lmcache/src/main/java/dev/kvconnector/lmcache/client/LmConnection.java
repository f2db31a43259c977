package dev.kvconnector.lmcache.client;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmRequestHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import dev.kvconnector.store.GetResult;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One TCP connection to an LMCache server, speaking one protocol version. Not thread-safe: one request at a
 * time, as the server handles a connection's requests in order.
 *
 * <p>Headers go through two direct buffers owned by the connection; payloads move straight between the socket and
 * the caller's segment. Every wait for the socket is bounded by the I/O timeout, counted from the last byte that
 * moved. Any failure (I/O error, timeout, end of stream, a reply that breaks the protocol) marks the connection
 * {@link #isBroken() broken}: its framing can no longer be trusted, so it must be closed, not reused.
 *
 * <p>PUT has no reply in either protocol version: a PUT returns once its bytes are handed to the socket, and a
 * failure of the server to store them is seen only by a later request (see {@link LmStore} for how the store
 * confirms puts).
 *
 * <p>Over 400 lines because one connection speaks both protocol versions: the framing, each version's headers and
 * the checks of every reply share the socket's state.
 */
public final class LmConnection implements AutoCloseable {
    /** Replies up to this size (bytes) that the caller does not want are read and dropped; larger ones close. */
    static final long DRAIN_LIMIT_BYTES = 8L << 20;
    /**
     * The key sent with HEALTH and LIST, which need none, and with the store's health probe. The Python v1 server
     * parses every request's key as a {@code CacheEngineKey}, so this one has the five {@code @}-separated parts of
     * one.
     */
    static final String PROBE_KEY = "vllm@kvconnector-health@1@0@0";
    private static final int DRAIN_BUFFER_BYTES = 64 * 1024;

    private final String host;
    private final int port;
    private final LmProtocolVersion protocol;
    private final long ioTimeoutMillis;
    private final long maxReplyBytes;
    private final String store;
    private final SocketChannel channel;
    private final Selector selector;
    private final SelectionKey selectionKey;
    private final ByteBuffer requestBuffer;
    private final ByteBuffer replyBuffer;
    private final ByteBuffer[] headerAndPayload = new ByteBuffer[2];
    private final LmRequestHeader request = new LmRequestHeader();
    private final LmReplyHeader reply = new LmReplyHeader();
    private ByteBuffer drainBuffer;
    private int replyTo;
    private boolean broken;
    private boolean closed;

    private LmConnection(String host, int port, LmProtocolVersion protocol, long ioTimeoutMillis, long maxReplyBytes,
                         String store, SocketChannel channel, Selector selector, SelectionKey selectionKey) {
        this.host = host;
        this.port = port;
        this.protocol = protocol;
        this.ioTimeoutMillis = ioTimeoutMillis;
        this.maxReplyBytes = maxReplyBytes;
        this.store = store;
        this.channel = channel;
        this.selector = selector;
        this.selectionKey = selectionKey;
        this.requestBuffer = ByteBuffer.allocateDirect(protocol.requestHeaderBytes());
        this.replyBuffer = ByteBuffer.allocateDirect(protocol.replyHeaderBytes());
    }

    /**
     * Connects to {@code host:port}.
     *
     * @param connectTimeoutMillis longest wait for the TCP connection, in ms (> 0)
     * @param ioTimeoutMillis      longest wait for any byte to move once connected, in ms (> 0)
     * @param maxReplyBytes        largest reply payload accepted, in bytes; a larger length is a protocol error
     * @param store                the masked store URI, for error messages
     * @throws KVException {@code STORE_UNREACHABLE} or {@code TIMEOUT}, naming host and port
     */
    public static LmConnection open(String host, int port, LmProtocolVersion protocol, long connectTimeoutMillis,
                                    long ioTimeoutMillis, long maxReplyBytes, String store) {
        SocketChannel ch = null;
        Selector sel = null;
        try {
            ch = SocketChannel.open();
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            sel = Selector.open();
            SelectionKey key = ch.register(sel, SelectionKey.OP_CONNECT);
            if (!ch.connect(new InetSocketAddress(host, port))) {
                long deadline = System.nanoTime() + connectTimeoutMillis * 1_000_000L;
                while (!ch.finishConnect()) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw KVException.of(ErrorCode.TIMEOUT, "no TCP connection to " + host + ":" + port
                                        + " within " + connectTimeoutMillis + " ms")
                                .store(store).operation("connect")
                                .hint("is the LMCache server running there and the port open? raise connect-timeout "
                                        + "for slow networks")
                                .build();
                    }
                    sel.select(Math.max(1, left / 1_000_000L));
                    sel.selectedKeys().clear();
                }
            }
            key.interestOps(0);
            return new LmConnection(host, port, protocol, ioTimeoutMillis, maxReplyBytes, store, ch, sel, key);
        } catch (IOException e) {
            closeQuietly(sel);
            closeQuietly(ch);
            throw KVException.of(ErrorCode.STORE_UNREACHABLE, "cannot connect to the LMCache server at " + host
                            + ":" + port + ": " + e.getMessage())
                    .store(store).operation("connect")
                    .hint("start it (kvctl lmserver --port " + port + ", or python -m lmcache"
                            + (protocol == LmProtocolVersion.V1 ? ".v1" : "") + ".server " + host + " " + port
                            + ") and check host, port and firewalls")
                    .cause(e).build();
        } catch (RuntimeException e) {
            closeQuietly(sel);
            closeQuietly(ch);
            throw e;
        }
    }

    /** The protocol version this connection speaks. */
    public LmProtocolVersion protocol() {
        return protocol;
    }

    /**
     * Sends a PUT of {@code value} with the given v1 metadata (ignored by v0). There is no reply; a server that
     * cannot store the value drops it silently.
     *
     * @throws KVException {@code VALUE_TOO_LARGE} over 2^31-1 bytes, {@code INVALID_ARGUMENT} for a key that does
     *                     not fit the 150-byte field, or a connection failure
     */
    public void put(String key, MemorySegment value, LmObjectMeta meta) {
        checkOpen("put", key);
        long size = value.byteSize();
        if (size > Integer.MAX_VALUE) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "a value of " + size + " bytes does not fit the int32 "
                            + "length field of the LMCache protocol (at most " + Integer.MAX_VALUE + " bytes)")
                    .store(store).operation("put").key(key)
                    .hint("split the value into chunks of less than 2 GiB").build();
        }
        request.set(LmWire.PUT, key, (int) size, meta, LmWire.LOCATION_NONE).encode(protocol, requestBuffer);
        writeRequest(size == 0 ? null : value.asByteBuffer(), "put", key);
    }

    /**
     * Sends a GET and reads the value straight into {@code dst} from offset 0. When {@code dst} is too small, the
     * payload is read and dropped (or, above 8 MiB, the connection is marked broken instead, which is cheaper than
     * moving the bytes). The reply's v1 metadata stays in {@link #lastReply()}.
     *
     * @return a {@link GetResult} code: the bytes copied, a miss, or too-small with the value's size
     */
    public long get(String key, MemorySegment dst) {
        sendGet(key, dst);
        return readGetReply(key, dst, true);
    }

    /**
     * Sends a GET without waiting for its reply, for pipelining: read the replies with {@link #readGetReply} in
     * the order the requests were sent. Keep the requests in flight to a few hundred, so that neither side's
     * socket buffers fill while the other is still writing.
     */
    public void sendGet(String key, MemorySegment dst) {
        if (dst.isReadOnly()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the destination segment is read-only")
                    .store(store).operation("get").key(key).hint("pass a writable segment").build();
        }
        checkOpen("get", key);
        request.set(LmWire.GET, key).encode(protocol, requestBuffer);
        writeRequest(null, "get", key);
    }

    /**
     * Reads the reply to a GET sent by {@link #sendGet} into {@code dst}.
     *
     * @param mayAbandon whether an unwanted payload above 8 MiB may be cut off by giving up the connection; pass
     *                   false while replies to further requests are still to come
     * @return a {@link GetResult} code
     */
    public long readGetReply(String key, MemorySegment dst, boolean mayAbandon) {
        long length = readGetHeader("get", key);
        if (length < 0) {
            return GetResult.MISS;
        }
        if (length > dst.byteSize()) {
            skipPayload(length, "get", key, mayAbandon);
            return GetResult.tooSmall(length);
        }
        if (length > 0) {
            readFully(dst.asSlice(0, length).asByteBuffer(), "the value of GET", "get", key);
        }
        return length;
    }

    /**
     * The size in bytes of the value under {@code key}, or -1 when absent. The protocol has no size request, so
     * this is a GET whose payload is read and dropped (up to 8 MiB) or cut off by closing the connection (above).
     */
    public long size(String key) {
        checkOpen("size", key);
        request.set(LmWire.GET, key).encode(protocol, requestBuffer);
        writeRequest(null, "size", key);
        long length = readGetHeader("size", key);
        if (length >= 0) {
            skipPayload(length, "size", key, true);
        }
        return length;
    }

    /** Whether the server holds {@code key} (EXIST). */
    public boolean exist(String key) {
        sendExist(key);
        return readExistReply(key);
    }

    /** Sends an EXIST without waiting for its reply; see {@link #sendGet} on pipelining. */
    public void sendExist(String key) {
        checkOpen("exists", key);
        request.set(LmWire.EXIST, key).encode(protocol, requestBuffer);
        writeRequest(null, "exists", key);
    }

    /** Reads the reply to an EXIST sent by {@link #sendExist}: whether the key exists. */
    public boolean readExistReply(String key) {
        readReplyHeader("exists", key, LmWire.EXIST);
        requireNoPayload("exists", key);
        return reply.code() == LmWire.SUCCESS;
    }

    /**
     * Asks a v1 server whether it is healthy (HEALTH); a server that says FAIL gives false.
     *
     * @throws KVException {@code UNSUPPORTED} on a v0 connection: the 2024 server never answers HEALTH
     */
    public boolean health() {
        if (!protocol.servesHealth()) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "the 2024 (v0) LMCache protocol has no HEALTH request")
                    .store(store).operation("health")
                    .hint("probe a v0 server with EXIST, or use protocol=v1 for python -m lmcache.v1.server").build();
        }
        checkOpen("health", null);
        request.set(LmWire.HEALTH, PROBE_KEY).encode(protocol, requestBuffer);
        writeRequest(null, "health", null);
        readReplyHeader("health", null, LmWire.HEALTH);
        requireNoPayload("health", null);
        return reply.code() == LmWire.SUCCESS;
    }

    /**
     * Lists the server's keys (LIST, v0 only). Not a data-path call: the reply is read onto the heap, bounded by
     * the connection's largest reply size.
     *
     * @throws KVException {@code UNSUPPORTED} on a v1 connection (the v1 server never answers LIST) or when the
     *                     server replies FAIL
     */
    public List<String> list() {
        if (!protocol.servesList()) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "the v1 LMCache protocol has no LIST request")
                    .store(store).operation("list")
                    .hint("LIST is served only by the 2024 server; use protocol=v0").build();
        }
        checkOpen("list", null);
        request.set(LmWire.LIST, PROBE_KEY).encode(protocol, requestBuffer);
        writeRequest(null, "list", null);
        readReplyHeader("list", null, LmWire.LIST);
        if (reply.code() != LmWire.SUCCESS) {
            requireNoPayload("list", null);
            throw KVException.of(ErrorCode.UNSUPPORTED, "the server at " + host + ":" + port
                    + " answered LIST with code " + reply.code()).store(store).operation("list").build();
        }
        int length = checkedLength("list", null);
        ByteBuffer keys = ByteBuffer.allocate(length);
        readFully(keys, "the LIST reply", "list", null);
        List<String> out = new ArrayList<>();
        if (length > 0) {
            for (String k : new String(keys.array(), StandardCharsets.UTF_8).split("\n", -1)) {
                out.add(k);
            }
        }
        return out;
    }

    /** The header of the last reply read; v1 replies carry the value's format, dtype and shape. */
    public LmReplyHeader lastReply() {
        return reply;
    }

    /** Whether a failure left this connection unusable; a broken connection must be closed. */
    public boolean isBroken() {
        return broken || closed;
    }

    /** Closes the socket. Idempotent. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            closeQuietly(selector);
            closeQuietly(channel);
        }
    }

    /** Reads a GET reply header: the value's length, or -1 on a miss. */
    private long readGetHeader(String op, String key) {
        readReplyHeader(op, key, LmWire.GET);
        if (reply.code() == LmWire.FAIL) {
            requireNoPayload(op, key);
            return -1;
        }
        return checkedLength(op, key);
    }

    private void readReplyHeader(String op, String key, int command) {
        replyTo = command;
        replyBuffer.clear();
        readFully(replyBuffer, "the reply header", op, key);
        reply.decode(protocol, replyBuffer);
        if (reply.code() != LmWire.SUCCESS && reply.code() != LmWire.FAIL) {
            throw protocolError(op, key, "a reply with unknown code " + reply.code() + " (expected 200 or 400) to "
                    + LmWire.commandName(command));
        }
    }

    private int checkedLength(String op, String key) {
        int length = reply.length();
        if (length < 0 || length > maxReplyBytes) {
            throw protocolError(op, key, "a reply length of " + length + " bytes to " + LmWire.commandName(
                    replyTo) + ", outside 0.." + maxReplyBytes + " (max-reply)");
        }
        return length;
    }

    private void requireNoPayload(String op, String key) {
        if (reply.length() != 0) {
            throw protocolError(op, key, "a reply (code " + reply.code() + ") to " + LmWire.commandName(
                    replyTo) + " announcing " + reply.length() + " payload bytes where none belong");
        }
    }

    private void skipPayload(long length, String op, String key, boolean mayAbandon) {
        if (mayAbandon && length > DRAIN_LIMIT_BYTES) {
            broken = true;
            return;
        }
        if (drainBuffer == null) {
            drainBuffer = ByteBuffer.allocateDirect(DRAIN_BUFFER_BYTES);
        }
        long left = length;
        while (left > 0) {
            drainBuffer.clear().limit((int) Math.min(left, DRAIN_BUFFER_BYTES));
            readFully(drainBuffer, "a value being skipped", op, key);
            left -= drainBuffer.limit();
        }
    }

    private void writeRequest(ByteBuffer payload, String op, String key) {
        headerAndPayload[0] = requestBuffer;
        headerAndPayload[1] = payload;
        int buffers = payload == null ? 1 : 2;
        long deadline = 0;
        try {
            while (requestBuffer.hasRemaining() || (payload != null && payload.hasRemaining())) {
                long n = channel.write(headerAndPayload, 0, buffers);
                if (n > 0) {
                    deadline = 0;
                    continue;
                }
                if (deadline == 0) {
                    deadline = System.nanoTime() + ioTimeoutMillis * 1_000_000L;
                }
                await(SelectionKey.OP_WRITE, deadline, "sending " + LmWire.commandName(request.command()), op, key);
            }
        } catch (IOException e) {
            throw unreachable(op, key, "sending " + LmWire.commandName(request.command()) + " failed: "
                    + e.getMessage(), e);
        } finally {
            headerAndPayload[1] = null;
        }
    }

    private void readFully(ByteBuffer dst, String what, String op, String key) {
        long deadline = 0;
        int start = dst.position();
        try {
            while (dst.hasRemaining()) {
                int n = channel.read(dst);
                if (n > 0) {
                    deadline = 0;
                } else if (n < 0) {
                    throw unreachable(op, key, "the server closed the connection after " + (dst.position() - start)
                            + " of " + (dst.limit() - start) + " bytes of " + what, null);
                } else {
                    if (deadline == 0) {
                        deadline = System.nanoTime() + ioTimeoutMillis * 1_000_000L;
                    }
                    await(SelectionKey.OP_READ, deadline, "waiting for " + what, op, key);
                }
            }
        } catch (IOException e) {
            throw unreachable(op, key, "reading " + what + " failed: " + e.getMessage(), e);
        }
    }

    private void await(int ops, long deadline, String what, String op, String key) throws IOException {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            broken = true;
            throw KVException.of(ErrorCode.TIMEOUT, "no progress " + what + " from " + host + ":" + port + " within "
                            + ioTimeoutMillis + " ms")
                    .store(store).operation(op).key(key)
                    .hint("check that the server is alive and that protocol=" + protocol.label() + " matches it (a "
                            + "v0 client waits forever on a v1 server's longer replies); raise timeout for slow links")
                    .build();
        }
        selectionKey.interestOps(ops);
        selector.select(Math.max(1, (left + 999_999) / 1_000_000L));
        selector.selectedKeys().clear();
    }

    private void checkOpen(String op, String key) {
        if (broken || closed) {
            throw KVException.of(ErrorCode.CLOSED, "this LMCache connection to " + host + ":" + port
                    + (closed ? " is closed" : " broke earlier and cannot be reused"))
                    .store(store).operation(op).key(key).build();
        }
    }

    private KVException unreachable(String op, String key, String detail, IOException cause) {
        broken = true;
        return KVException.of(ErrorCode.STORE_UNREACHABLE, detail + " (LMCache server " + host + ":" + port + ")")
                .store(store).operation(op).key(key)
                .hint("the server stopped, restarted or dropped the connection; check its log. A v0 server also "
                        + "closes on requests it cannot parse")
                .cause(cause).build();
    }

    private KVException protocolError(String op, String key, String detail) {
        broken = true;
        return KVException.of(ErrorCode.PROTOCOL_ERROR, "the server at " + host + ":" + port + " sent " + detail)
                .store(store).operation(op).key(key)
                .hint("check that protocol=" + protocol.label() + " matches the server (v0: python -m lmcache.server,"
                        + " v1: python -m lmcache.v1.server) and that the port is an LMCache server")
                .build();
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c != null) {
            try {
                c.close();
            } catch (Exception ignored) {
                // Closing a socket we are discarding: nothing useful to do with a failure.
            }
        }
    }
}
