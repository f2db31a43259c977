package dev.kvconnector.kvctl;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * A RESP2 server on a free 127.0.0.1 port that answers each command with what a script returns, to imitate servers
 * that lie about sizes, stall or die halfway. The script gets the command's words and returns a {@link Reply}: bytes
 * to send, then whether to go on, to stall (send nothing more on that connection) or to hang up. Clients should use
 * {@code protocol=2}: a HELLO gets the script's answer like any other command.
 */
final class FakeRespServer implements AutoCloseable {
    /** What happens after a reply's bytes were sent. */
    enum After { CONTINUE, STALL, HANG_UP }

    /** Bytes to send, and what to do next. */
    record Reply(byte[] bytes, After after) {
        static Reply of(byte[] bytes) {
            return new Reply(bytes, After.CONTINUE);
        }

        static Reply thenStall(byte[] bytes) {
            return new Reply(bytes, After.STALL);
        }

        static Reply thenHangUp(byte[] bytes) {
            return new Reply(bytes, After.HANG_UP);
        }
    }

    private final ServerSocket server;
    private final Function<List<String>, Reply> script;
    private final List<Socket> clients = new CopyOnWriteArrayList<>();
    private final Thread acceptor;

    FakeRespServer(Function<List<String>, Reply> script) throws IOException {
        this.server = new ServerSocket(0, 16, InetAddress.getLoopbackAddress());
        this.script = script;
        this.acceptor = Thread.ofPlatform().daemon().name("fake-resp-accept").start(this::acceptLoop);
    }

    int port() {
        return server.getLocalPort();
    }

    /** A kvctl store URI for this server, with the given extra options. */
    String uri(String options) {
        return "valkey://127.0.0.1:" + port() + "?protocol=2&pool=1" + (options.isEmpty() ? "" : "&" + options);
    }

    static byte[] integer(long n) {
        return (":" + n + "\r\n").getBytes(StandardCharsets.US_ASCII);
    }

    static byte[] error(String text) {
        return ("-" + text + "\r\n").getBytes(StandardCharsets.US_ASCII);
    }

    static byte[] bulk(byte[] value) {
        byte[] head = ("$" + value.length + "\r\n").getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[head.length + value.length + 2];
        System.arraycopy(head, 0, out, 0, head.length);
        System.arraycopy(value, 0, out, head.length, value.length);
        out[out.length - 2] = '\r';
        out[out.length - 1] = '\n';
        return out;
    }

    /** The start of a bulk reply that announces {@code announced} bytes and then carries only {@code part}. */
    static byte[] partialBulk(long announced, byte[] part) {
        byte[] head = ("$" + announced + "\r\n").getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[head.length + part.length];
        System.arraycopy(head, 0, out, 0, head.length);
        System.arraycopy(part, 0, out, head.length, part.length);
        return out;
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                clients.add(s);
                Thread.ofPlatform().daemon().name("fake-resp-conn").start(() -> serve(s));
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s) {
        try (s; InputStream in = new BufferedInputStream(s.getInputStream()); OutputStream out = s.getOutputStream()) {
            while (true) {
                List<String> command = readCommand(in);
                if (command == null) {
                    return;
                }
                Reply reply = script.apply(command);
                out.write(reply.bytes());
                out.flush();
                if (reply.after() == After.HANG_UP) {
                    return;
                }
                if (reply.after() == After.STALL) {
                    while (in.read() >= 0) {
                        // hold the connection open, answering nothing, until the client gives up
                    }
                    return;
                }
            }
        } catch (IOException e) {
            // the client closed its end
        }
    }

    /** Reads one RESP array of bulk strings; null at the end of the stream. */
    private static List<String> readCommand(InputStream in) throws IOException {
        String line = readLine(in);
        if (line == null) {
            return null;
        }
        int n = Integer.parseInt(line.substring(1));
        List<String> words = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int len = Integer.parseInt(readLine(in).substring(1));
            byte[] b = in.readNBytes(len + 2);
            words.add(new String(b, 0, len, StandardCharsets.UTF_8));
        }
        return words;
    }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = in.read()) >= 0) {
            if (c == '\n') {
                return sb.substring(0, sb.length() - 1);
            }
            sb.append((char) c);
        }
        return null;
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : clients) {
            s.close();
        }
        try {
            acceptor.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
