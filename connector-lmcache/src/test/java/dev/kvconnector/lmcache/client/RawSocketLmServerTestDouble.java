package dev.kvconnector.lmcache.client;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test double of an LMCache server on a raw {@link ServerSocket}: each connection runs a script that reads
 * request bytes and writes whatever bytes the test wants, including broken ones, then closes the connection.
 */
final class RawSocketLmServerTestDouble implements AutoCloseable {
    /** What the double does with one connection. */
    @FunctionalInterface
    interface Script {
        void run(DataInputStream in, OutputStream out) throws IOException;
    }

    private final ServerSocket listener;
    private final Script script;
    private final AtomicInteger connections = new AtomicInteger();
    private final Thread acceptor;

    RawSocketLmServerTestDouble(Script script) throws IOException {
        this.script = script;
        this.listener = new ServerSocket(0, 16, InetAddress.getLoopbackAddress());
        this.acceptor = Thread.ofVirtual().start(this::acceptLoop);
    }

    int port() {
        return listener.getLocalPort();
    }

    /** Connections accepted so far. */
    int connections() {
        return connections.get();
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            try {
                Socket s = listener.accept();
                connections.incrementAndGet();
                Thread.ofVirtual().start(() -> {
                    try (s) {
                        script.run(new DataInputStream(s.getInputStream()), s.getOutputStream());
                    } catch (IOException e) {
                        // The client went away; the script is over.
                    }
                });
            } catch (IOException e) {
                return;
            }
        }
    }

    /** Reads one request header of {@code bytes} bytes, or throws at end of stream. */
    static void readHeader(DataInputStream in, int bytes) throws IOException {
        in.readFully(new byte[bytes]);
    }

    /** Little-endian int32 values as bytes. */
    static byte[] ints(int... values) {
        byte[] b = new byte[values.length * 4];
        java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(values);
        return b;
    }

    @Override
    public void close() throws Exception {
        listener.close();
        acceptor.join(5_000);
    }
}
