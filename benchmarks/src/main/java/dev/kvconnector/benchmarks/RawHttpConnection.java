package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One keep-alive HTTP/1.1 connection of a load client, the lightest the JDK allows (a blocking socket): it posts
 * completion requests one after another and reads each answer (Content-Length or chunked) into a reused buffer,
 * checking the status and, for streams, the final {@code [DONE]} event. A connection the server closed while idle is
 * reopened once and counted. Not thread-safe: one client thread each.
 */
final class RawHttpConnection {
    private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);
    private final String hostPort;
    private final InetSocketAddress address;
    private final AtomicLong reconnects;
    private final byte[] in = new byte[16 << 10];
    private int pos;
    private int limit;
    private byte[] body = new byte[4096];
    private int bodyLength;
    private Socket socket;
    private InputStream input;
    private OutputStream output;

    /** A connection to {@code hostPort}, opened on the first exchange; reopenings are counted in {@code reconnects}. */
    RawHttpConnection(String hostPort, AtomicLong reconnects) {
        this.hostPort = hostPort;
        int colon = hostPort.lastIndexOf(':');
        this.address = new InetSocketAddress(hostPort.substring(0, colon),
                Integer.parseInt(hostPort.substring(colon + 1)));
        this.reconnects = reconnects;
    }

    /** The bytes of {@code POST /v1/completions} to {@code hostPort} with {@code json} as its body. */
    static byte[] completion(String hostPort, String json) {
        byte[] payload = json.getBytes(StandardCharsets.UTF_8);
        byte[] head = ("POST /v1/completions HTTP/1.1\r\nHost: " + hostPort
                + "\r\nContent-Type: application/json\r\nContent-Length: " + payload.length + "\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII);
        byte[] request = Arrays.copyOf(head, head.length + payload.length);
        System.arraycopy(payload, 0, request, head.length, payload.length);
        return request;
    }

    /** This connection's {@code host:port}. */
    String hostPort() {
        return hostPort;
    }

    /** The last answer's body: its first {@link #bodyLength()} bytes. */
    byte[] body() {
        return body;
    }

    int bodyLength() {
        return bodyLength;
    }

    /**
     * Sends {@code request} (from {@link #completion}) and reads the answer, a stream ending in {@code [DONE]} when
     * {@code stream}; throws unless it is a 200.
     */
    void exchange(byte[] request, boolean stream) throws IOException {
        boolean fresh = socket == null;
        if (fresh) {
            open();
        }
        try {
            output.write(request);
            output.flush();
            if (!fill()) {
                throw new IOException("closed before the answer");
            }
        } catch (IOException e) {
            if (fresh) {
                throw new IOException(hostPort + ": " + e.getMessage(), e);
            }
            // The server dropped the idle keep-alive connection: no byte of an answer came, so send again.
            reconnects.incrementAndGet();
            open();
            output.write(request);
            output.flush();
        }
        readAnswer(stream);
    }

    private void open() throws IOException {
        close();
        Socket s = new Socket();
        s.setTcpNoDelay(true);
        s.connect(address, 5000);
        socket = s;
        input = s.getInputStream();
        output = s.getOutputStream();
        pos = 0;
        limit = 0;
    }

    private void readAnswer(boolean stream) throws IOException {
        String status = line();
        if (!status.startsWith("HTTP/1.1 200")) {
            throw new IOException(hostPort + " answered " + status);
        }
        long contentLength = -1;
        boolean chunked = false;
        boolean closeAfter = false;
        for (String h = line(); !h.isEmpty(); h = line()) {
            int colon = h.indexOf(':');
            String name = h.substring(0, colon).trim();
            String value = h.substring(colon + 1).trim();
            if (name.equalsIgnoreCase("Content-Length")) {
                contentLength = Long.parseLong(value);
            } else if (name.equalsIgnoreCase("Transfer-Encoding")) {
                chunked = value.equalsIgnoreCase("chunked");
            } else if (name.equalsIgnoreCase("Connection")) {
                closeAfter = value.equalsIgnoreCase("close");
            }
        }
        bodyLength = 0;
        if (chunked) {
            for (int size = chunkSize(); size > 0; size = chunkSize()) {
                readBody(size);
                line();
            }
            line();
        } else if (contentLength >= 0) {
            readBody((int) contentLength);
        } else {
            throw new IOException(hostPort + " answered with neither Content-Length nor chunked encoding");
        }
        if (stream && !endsWithDone()) {
            throw new IOException(hostPort + " streamed an answer without the final [DONE] event");
        }
        if (closeAfter) {
            close();
        }
    }

    private int chunkSize() throws IOException {
        return Integer.parseInt(line().trim(), 16);
    }

    private boolean endsWithDone() {
        return bodyLength >= DONE.length
                && Arrays.equals(body, bodyLength - DONE.length, bodyLength, DONE, 0, DONE.length);
    }

    private void readBody(int n) throws IOException {
        if (bodyLength + n > body.length) {
            body = Arrays.copyOf(body, Math.max(body.length * 2, bodyLength + n));
        }
        while (n > 0) {
            if (pos == limit && !fill()) {
                throw new IOException(hostPort + " closed the connection mid-body");
            }
            int k = Math.min(n, limit - pos);
            System.arraycopy(in, pos, body, bodyLength, k);
            pos += k;
            bodyLength += k;
            n -= k;
        }
    }

    private String line() throws IOException {
        StringBuilder sb = new StringBuilder(64);
        while (true) {
            if (pos == limit && !fill()) {
                throw new IOException(hostPort + " closed the connection mid-answer");
            }
            byte b = in[pos++];
            if (b == '\n') {
                int len = sb.length();
                if (len > 0 && sb.charAt(len - 1) == '\r') {
                    sb.setLength(len - 1);
                }
                return sb.toString();
            }
            sb.append((char) b);
        }
    }

    /** Reads more bytes; false at the end of the stream. */
    private boolean fill() throws IOException {
        if (pos < limit) {
            return true;
        }
        int n = input.read(in, 0, in.length);
        if (n <= 0) {
            return false;
        }
        pos = 0;
        limit = n;
        return true;
    }

    /** Closes the socket; the next exchange opens another. */
    void close() {
        if (socket != null) {
            try {
                socket.close();
            } catch (IOException ignored) {
                // Closing a loopback socket the test is done with: nothing left to lose.
            }
            socket = null;
        }
    }
}
