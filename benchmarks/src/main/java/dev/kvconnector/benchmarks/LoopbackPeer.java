package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;

/**
 * The far end of the socket floor: an in-process thread on a 127.0.0.1 port that answers one client connection in
 * one of three ways, with no framing and no parsing, so that what the client measures is the kernel's loopback
 * path and nothing else. Buffers are native segments, as the SDK's own are.
 */
final class LoopbackPeer implements AutoCloseable {
    /** What the peer does for each exchange of a layer of {@code bytes} bytes. */
    enum Reply {
        /** Reads {@code bytes}, answers 1 byte: the floor of a network PUT. */
        ACK,
        /** Reads {@code bytes}, sends them back: the echo round trip. */
        ECHO,
        /** Reads 1 byte, answers {@code bytes}: the floor of a network GET. */
        SERVE
    }

    private final Reply reply;
    private final long bytes;
    private final Arena arena = Arena.ofShared();
    private final ByteBuffer buffer;
    private final ServerSocketChannel server;
    private final Thread thread;
    private final SocketChannel client;

    /** Binds a free loopback port, starts the peer thread and connects the client end. */
    LoopbackPeer(Reply reply, long bytes) {
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a layer of " + bytes + " bytes does not fit one ByteBuffer");
        }
        this.reply = reply;
        this.bytes = bytes;
        MemorySegment seg = arena.allocate(bytes, LayerShape.ALIGNMENT);
        buffer = seg.asByteBuffer();
        try {
            server = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            thread = Thread.ofPlatform().daemon().name("loopback-peer-" + reply).start(this::serve);
            client = SocketChannel.open(server.getLocalAddress());
            client.setOption(StandardSocketOptions.TCP_NODELAY, true);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot set up the loopback peer", e);
        }
    }

    /** The client end, blocking, TCP_NODELAY. */
    SocketChannel client() {
        return client;
    }

    private void serve() {
        try (SocketChannel c = server.accept()) {
            c.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ByteBuffer one = ByteBuffer.allocateDirect(1);
            while (true) {
                long in = reply == Reply.SERVE ? 1 : bytes;
                ByteBuffer dst = reply == Reply.SERVE ? one.clear() : buffer.clear();
                if (!readFully(c, dst, in)) {
                    return;
                }
                ByteBuffer out = reply == Reply.ACK ? one.clear() : buffer.clear();
                writeFully(c, out);
            }
        } catch (IOException e) {
            // The client closed mid-exchange at teardown; nothing is left to serve.
        }
    }

    /** Reads exactly {@code n} bytes into {@code dst}; false at end of stream before the first byte. */
    static boolean readFully(SocketChannel c, ByteBuffer dst, long n) throws IOException {
        dst.limit((int) n);
        while (dst.hasRemaining()) {
            if (c.read(dst) < 0) {
                if (dst.position() == 0) {
                    return false;
                }
                throw new IOException("peer closed after " + dst.position() + " of " + n + " bytes");
            }
        }
        return true;
    }

    /** Writes all of {@code src}. */
    static void writeFully(SocketChannel c, ByteBuffer src) throws IOException {
        while (src.hasRemaining()) {
            c.write(src);
        }
    }

    /** Closes the client, which ends the peer thread, then the listening socket and the buffers. */
    @Override
    public void close() {
        try {
            client.close();
            server.close();
            thread.join(10_000);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            arena.close();
        }
    }
}
