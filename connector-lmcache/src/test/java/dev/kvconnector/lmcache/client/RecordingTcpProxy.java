package dev.kvconnector.lmcache.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * A TCP proxy for tests that forwards one connection to an upstream server and records every byte in each
 * direction, so a test can compare the conversation with captured bytes.
 */
final class RecordingTcpProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int upstreamPort;
    private final ByteArrayOutputStream toServer = new ByteArrayOutputStream();
    private final ByteArrayOutputStream toClient = new ByteArrayOutputStream();
    private final Thread acceptor;
    private volatile Thread up;
    private volatile Thread down;
    private volatile Socket client;
    private volatile Socket server;

    RecordingTcpProxy(int upstreamPort) throws IOException {
        this.upstreamPort = upstreamPort;
        this.listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        this.acceptor = Thread.ofVirtual().start(this::acceptOne);
    }

    int port() {
        return listener.getLocalPort();
    }

    private void acceptOne() {
        try {
            client = listener.accept();
            server = new Socket();
            server.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), upstreamPort));
            up = Thread.ofVirtual().start(() -> pump(client, server, toServer));
            down = Thread.ofVirtual().start(() -> pump(server, client, toClient));
        } catch (IOException e) {
            closeAll();
        }
    }

    private static void pump(Socket from, Socket to, ByteArrayOutputStream record) {
        byte[] buf = new byte[8192];
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
            int n;
            while ((n = in.read(buf)) > 0) {
                synchronized (record) {
                    record.write(buf, 0, n);
                }
                out.write(buf, 0, n);
            }
        } catch (IOException e) {
            // The other side closed: the recording ends here.
        }
    }

    /** Bytes the client sent, once both directions have ended (call after the client closed). */
    byte[] clientBytes() throws InterruptedException {
        awaitEnd();
        synchronized (toServer) {
            return toServer.toByteArray();
        }
    }

    /** Bytes the server sent, once both directions have ended. */
    byte[] serverBytes() throws InterruptedException {
        awaitEnd();
        synchronized (toClient) {
            return toClient.toByteArray();
        }
    }

    private void awaitEnd() throws InterruptedException {
        acceptor.join(5_000);
        if (up != null) {
            up.join(5_000);
        }
        closeAll();
        if (down != null) {
            down.join(5_000);
        }
    }

    private void closeAll() {
        for (AutoCloseable c : new AutoCloseable[] {listener, client, server}) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception ignored) {
                    // Test teardown.
                }
            }
        }
    }

    @Override
    public void close() {
        closeAll();
    }
}
