package dev.kvconnector.valkey.resp;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSession;

/**
 * TLS over a blocking {@link SocketChannel}, through an {@link SSLEngine}. Encryption is the one copy TLS
 * needs: a write encrypts straight from the caller's buffer (the command buffer or the value's memory) into the
 * network buffer, and a read decrypts straight into the destination when it has room for a whole TLS
 * record, else through a small application buffer.
 *
 * <p>Blocking like the plain path; the pool's watchdog closes the underlying socket to end a stalled call. Not
 * thread-safe: one per connection.
 */
final class TlsChannel implements ByteChannel {
    private static final ByteBuffer[] NOTHING = {ByteBuffer.allocate(0)};

    private final SocketChannel socket;
    private final SSLEngine engine;
    private final ByteBuffer netIn;
    private final ByteBuffer netOut;
    private final ByteBuffer appIn;
    /** The argument array of {@link SSLEngine#wrap(ByteBuffer[], int, int, ByteBuffer)}, reused per write. */
    private final ByteBuffer[] single = new ByteBuffer[1];
    private boolean inboundClosed;

    TlsChannel(SocketChannel socket, SSLEngine engine) {
        this.socket = socket;
        this.engine = engine;
        SSLSession s = engine.getSession();
        this.netIn = ByteBuffer.allocateDirect(s.getPacketBufferSize()).flip();
        this.netOut = ByteBuffer.allocateDirect(s.getPacketBufferSize());
        this.appIn = ByteBuffer.allocateDirect(s.getApplicationBufferSize()).flip();
    }

    /** Runs the TLS handshake to completion; certificate problems surface as {@link SSLException}. */
    void handshake() throws IOException {
        engine.beginHandshake();
        while (true) {
            switch (engine.getHandshakeStatus()) {
                case NEED_WRAP -> wrap(NOTHING, 0, 1);
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    appIn.compact();
                    try {
                        if (unwrapOnce(appIn) < 0) {
                            throw new EOFException("the server closed the connection during the TLS handshake");
                        }
                    } finally {
                        appIn.flip();
                    }
                }
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                }
                default -> {
                    return;
                }
            }
        }
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        if (appIn.hasRemaining()) {
            int n = Math.min(appIn.remaining(), dst.remaining());
            dst.put(dst.position(), appIn, appIn.position(), n);
            dst.position(dst.position() + n);
            appIn.position(appIn.position() + n);
            return n;
        }
        if (inboundClosed) {
            return -1;
        }
        int before = dst.position();
        if (dst.remaining() >= engine.getSession().getApplicationBufferSize()) {
            // Room for a whole record: decrypt straight into the destination.
            while (dst.position() == before) {
                if (unwrapOnce(dst) < 0) {
                    return dst.position() > before ? dst.position() - before : -1;
                }
            }
            return dst.position() - before;
        }
        appIn.clear();
        try {
            while (appIn.position() == 0) {
                if (unwrapOnce(appIn) < 0) {
                    break;
                }
            }
        } finally {
            appIn.flip();
        }
        if (!appIn.hasRemaining()) {
            return -1;
        }
        return read(dst);
    }

    /**
     * Unwraps one TLS record into {@code dst}, reading from the socket as needed.
     *
     * @return bytes produced (maybe 0 for a handshake or close record), or -1 at the end of the stream
     */
    private int unwrapOnce(ByteBuffer dst) throws IOException {
        while (true) {
            SSLEngineResult r = engine.unwrap(netIn, dst);
            switch (r.getStatus()) {
                case OK -> {
                    servicePostHandshake(r);
                    return r.bytesProduced();
                }
                case CLOSED -> {
                    inboundClosed = true;
                    return -1;
                }
                case BUFFER_UNDERFLOW -> {
                    netIn.compact();
                    int n;
                    try {
                        n = socket.read(netIn);
                    } finally {
                        netIn.flip();
                    }
                    if (n < 0) {
                        inboundClosed = true;
                        return -1;
                    }
                }
                case BUFFER_OVERFLOW -> throw new SSLException("a TLS record larger than the "
                        + dst.remaining() + "-byte buffer");
            }
        }
    }

    /** TLS 1.3 sends session tickets and key updates after the handshake; the engine may need a task or a reply. */
    private void servicePostHandshake(SSLEngineResult r) throws IOException {
        if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) {
            Runnable task;
            while ((task = engine.getDelegatedTask()) != null) {
                task.run();
            }
        }
        if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP
                || engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP) {
            wrap(NOTHING, 0, 1);
        }
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        single[0] = src;
        try {
            return (int) wrap(single, 0, 1);
        } finally {
            single[0] = null;
        }
    }

    /** Encrypts one record's worth of {@code srcs} and sends it; returns the plaintext bytes consumed. */
    private long wrap(ByteBuffer[] srcs, int offset, int length) throws IOException {
        netOut.clear();
        SSLEngineResult r = engine.wrap(srcs, offset, length, netOut);
        if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
            throw new SSLException("the TLS session was closed");
        }
        netOut.flip();
        while (netOut.hasRemaining()) {
            socket.write(netOut);
        }
        return r.bytesConsumed();
    }

    @Override
    public boolean isOpen() {
        return socket.isOpen();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
