package dev.kvconnector.lmcache.server;

import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmRequestHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;

/**
 * A bare protocol client for server tests: it sends exactly the frames a test asks for, including ones the real
 * client refuses to send, over a plain blocking socket.
 */
final class RawLmClient implements AutoCloseable {
    private final LmProtocolVersion version;
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    RawLmClient(int port, LmProtocolVersion version) throws IOException {
        this.version = version;
        this.socket = new Socket(InetAddress.getLoopbackAddress(), port);
        this.socket.setSoTimeout(5_000);
        this.in = new DataInputStream(socket.getInputStream());
        this.out = socket.getOutputStream();
    }

    void send(int command, String key, int length, LmObjectMeta meta) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(version.requestHeaderBytes());
        new LmRequestHeader().set(command, key, length, meta, LmWire.LOCATION_NONE).encode(version, b);
        out.write(b.array());
    }

    void send(int command, String key) throws IOException {
        send(command, key, 0, LmObjectMeta.NONE);
    }

    void put(String key, byte[] value) throws IOException {
        send(LmWire.PUT, key, value.length, LmObjectMeta.bytes(value.length));
        out.write(value);
    }

    void write(byte[] bytes) throws IOException {
        out.write(bytes);
    }

    LmReplyHeader reply() throws IOException {
        byte[] h = new byte[version.replyHeaderBytes()];
        in.readFully(h);
        return new LmReplyHeader().decode(version, ByteBuffer.wrap(h));
    }

    int exist(String key) throws IOException {
        send(LmWire.EXIST, key);
        return reply().code();
    }

    byte[] payload(int n) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    /** This client's local port, as the server's log names it. */
    int localPort() {
        return socket.getLocalPort();
    }

    /** Whether the server closed the connection (end of stream within 5 s). */
    boolean closedByServer() throws IOException {
        try {
            return in.read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
