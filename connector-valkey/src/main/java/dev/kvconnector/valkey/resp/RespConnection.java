package dev.kvconnector.valkey.resp;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;
import java.util.Locale;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;

/**
 * One TCP connection to a RESP server, with its reader, writer and handshake.
 *
 * <p>The channel is in blocking mode: on loopback and fast networks a blocking read or write is one
 * system call that returns when bytes moved, whereas a selector adds an epoll wait and a wake-up per buffer-full.
 * Blocking channels ignore {@code SO_TIMEOUT}, so timeouts are enforced by the pool's watchdog, which closes the
 * channel of an operation that made no progress for {@code timeout=} (see {@link InFlight}); that wakes the
 * blocked thread, and this connection is then discarded, never reused.
 *
 * <p>Not thread-safe: the pool lends a connection to one thread at a time.
 */
public final class RespConnection {
    private static final byte[] HELLO = RespWriter.token("HELLO");
    private static final byte[] AUTH = RespWriter.token("AUTH");
    private static final byte[] SELECT = RespWriter.token("SELECT");
    private static final byte[] THREE = RespWriter.token("3");

    private final Endpoint endpoint;
    private final RespSettings settings;
    private final InFlight inFlight;
    private final RespReader reader;
    private final RespWriter writer;
    private volatile SocketChannel channel;
    private int protocol;
    private long generation;
    private boolean broken;
    private boolean tlsHandshaking;

    /** An unconnected connection; {@link #connect} opens it. */
    public RespConnection(Endpoint endpoint, RespSettings settings) {
        this.endpoint = endpoint;
        this.settings = settings;
        this.inFlight = new InFlight(settings.timeoutMillis());
        this.reader = new RespReader(null, settings.bufferBytes(), settings.maxReplyBytes(), settings.maxElements(),
                endpoint, inFlight);
        this.writer = new RespWriter(null, settings.bufferBytes(), endpoint, inFlight);
    }

    /** The reply reader. */
    public RespReader reader() {
        return reader;
    }

    /** The command writer. */
    public RespWriter writer() {
        return writer;
    }

    /** The negotiated protocol: 2 or 3; 0 before a connect. */
    public int protocol() {
        return protocol;
    }

    /** The operation state the watchdog watches. */
    public InFlight inFlight() {
        return inFlight;
    }

    /** Whether a channel is open and no failure was seen on it. */
    public boolean usable() {
        SocketChannel c = channel;
        return c != null && c.isOpen() && !broken;
    }

    /** Marks the connection as failed: it is closed when released, never reused. */
    public void markBroken() {
        broken = true;
    }

    long generation() {
        return generation;
    }

    /**
     * Opens the socket and runs the handshake: HELLO 3 (with AUTH when a password is set), falling back to RESP2
     * and AUTH when the server refuses HELLO, then SELECT when a database other than 0 is asked for.
     */
    void connect(long gen) {
        close();
        broken = false;
        tlsHandshaking = false;
        generation = gen;
        SocketChannel ch = null;
        inFlight.begin("connect", null);
        try {
            ch = SocketChannel.open();
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
            ch.socket().connect(new InetSocketAddress(endpoint.host(), endpoint.port()),
                    (int) Math.min(Integer.MAX_VALUE, settings.connectTimeoutMillis()));
            ch.configureBlocking(true);
            channel = ch;
            if (settings.tls() != null) {
                TlsChannel tls = startTls(ch);
                reader.bind(tls);
                writer.bind(tls);
            } else {
                reader.bind(ch);
                writer.bind(ch);
            }
            handshake();
            if (!inFlight.end()) {
                throw KVException.of(ErrorCode.TIMEOUT, "the handshake with " + endpoint.hostPort()
                        + " took longer than " + settings.timeoutMillis() + " ms").store(endpoint.maskedUri())
                        .operation("connect").build();
            }
        } catch (SSLException e) {
            KVException stalled = inFlight.timedOut() ? tlsStalled(e) : null;
            inFlight.end();
            closeQuietly(ch);
            channel = null;
            if (stalled != null) {
                throw stalled;
            }
            throw KVException.of(ErrorCode.INVALID_CONFIG, "TLS handshake with " + endpoint.hostPort()
                            + " failed: " + e.getMessage())
                    .store(endpoint.maskedUri()).operation("connect").cause(e)
                    .hint("check that the port is a TLS port (tls-port), that tls-ca= or truststore= holds the CA "
                            + "that signed the server's certificate, that the certificate names the host in the URI "
                            + "(or verify-hostname=false), and that keystore= holds a client certificate when the "
                            + "server sets tls-auth-clients")
                    .build();
        } catch (IOException e) {
            KVException stalled = inFlight.timedOut() ? (tlsHandshaking ? tlsStalled(e) : endpoint.ioFailure(inFlight,
                    e)) : null;
            inFlight.end();
            closeQuietly(ch);
            channel = null;
            if (stalled != null) {
                throw stalled;
            }
            boolean timedOut = e instanceof SocketTimeoutException;
            throw KVException.of(timedOut ? ErrorCode.TIMEOUT : ErrorCode.STORE_UNREACHABLE,
                            "cannot connect to " + endpoint.hostPort() + ": " + e.getMessage())
                    .store(endpoint.maskedUri()).operation("connect").cause(e)
                    .hint(timedOut ? "no answer within connect-timeout=" + settings.connectTimeoutMillis()
                            + " ms: check the host, firewall and that the server is not paused"
                            : "check that the server is running and listens on " + endpoint.hostPort())
                    .build();
        } catch (RuntimeException e) {
            inFlight.end();
            closeQuietly(ch);
            channel = null;
            throw e;
        }
    }

    private TlsChannel startTls(SocketChannel ch) throws IOException {
        SSLEngine engine = settings.tls().createSSLEngine(endpoint.host(), endpoint.port());
        engine.setUseClientMode(true);
        if (settings.verifyHostname()) {
            SSLParameters p = engine.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            engine.setSSLParameters(p);
        }
        TlsChannel tls = new TlsChannel(ch, engine);
        // Left true on failure, so that the caller's error names the TLS handshake.
        tlsHandshaking = true;
        tls.handshake();
        tlsHandshaking = false;
        inFlight.progress();
        return tls;
    }

    private KVException tlsStalled(IOException cause) {
        return KVException.of(ErrorCode.TIMEOUT, endpoint.hostPort() + " did not complete a TLS handshake within "
                        + settings.timeoutMillis() + " ms")
                .store(endpoint.maskedUri()).operation("connect").cause(cause)
                .hint("a plain (non-TLS) port never answers a TLS hello: check that the port is the server's "
                        + "tls-port, or use valkey:// for a plain port")
                .build();
    }

    private void handshake() {
        String user = settings.user();
        String password = settings.password();
        protocol = 2;
        if (settings.protocol() != 2) {
            writer.array(password == null ? 2 : 5).raw(HELLO).raw(THREE);
            if (password != null) {
                writer.raw(AUTH).bulk(user == null ? "default" : user).bulk(password);
            }
            writer.flush();
            if (reader.skipReply() != RespReader.REPLY_ERROR) {
                protocol = 3;
            } else {
                String err = reader.lastError();
                if (isAuthError(err)) {
                    throw authFailed(err);
                }
                if (settings.protocol() == 3) {
                    throw KVException.of(ErrorCode.UNSUPPORTED, endpoint.hostPort() + " refused HELLO 3: "
                                    + sanitize(err))
                            .store(endpoint.maskedUri()).operation("connect")
                            .hint("the server does not speak RESP3 (Redis before 6); use protocol=auto or 2")
                            .build();
                }
            }
        }
        if (protocol == 2 && password != null) {
            writer.array(user == null ? 2 : 3).raw(AUTH);
            if (user != null) {
                writer.bulk(user);
            }
            writer.bulk(password).flush();
            if (reader.readStatus() == RespReader.REPLY_ERROR) {
                throw authFailed(reader.lastError());
            }
        }
        if (settings.database() != 0) {
            writer.array(2).raw(SELECT).bulk(settings.database()).flush();
            if (reader.readStatus() == RespReader.REPLY_ERROR) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, endpoint.hostPort() + " refused SELECT "
                                + settings.database() + ": " + sanitize(reader.lastError()))
                        .store(endpoint.maskedUri()).operation("connect")
                        .hint("the database number in the URI path must be below the server's 'databases' "
                                + "setting (16 by default), and cluster mode has only database 0")
                        .build();
            }
        }
    }

    private static boolean isAuthError(String err) {
        String e = err.toUpperCase(Locale.ROOT);
        if (e.contains("UNKNOWN COMMAND") || e.startsWith("NOPROTO")) {
            return false;
        }
        return e.startsWith("WRONGPASS") || e.startsWith("NOAUTH") || e.startsWith("ERR AUTH")
                || e.contains("PASSWORD");
    }

    private KVException authFailed(String serverMessage) {
        boolean noPassword = settings.password() == null;
        return KVException.of(ErrorCode.AUTH_FAILED, endpoint.hostPort() + " refused the credentials"
                        + (settings.user() == null ? "" : " of user '" + settings.user() + "'") + ": "
                        + sanitize(serverMessage))
                .store(endpoint.maskedUri()).operation("connect")
                .hint(noPassword ? "the server requires a password: valkey://[user]:password@host:port"
                        : "check the user name and password in the store URI (and the user's ACL: 'ACL LIST')")
                .build();
    }

    /**
     * A server message made safe for our messages: printable, at most 200 characters, with the password
     * removed (an old server's "unknown command" error echoes the arguments).
     */
    public String sanitize(String serverMessage) {
        if (serverMessage == null) {
            return "(no message)";
        }
        String s = serverMessage;
        String pw = settings.password();
        if (pw != null && !pw.isEmpty()) {
            s = s.replace(pw, "***");
        }
        StringBuilder b = new StringBuilder(Math.min(s.length(), 200));
        for (int i = 0; i < s.length() && b.length() < 200; i++) {
            char c = s.charAt(i);
            b.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return b.toString();
    }

    /** Closes the channel; the watchdog uses this to wake a stalled operation. */
    void abort() {
        closeQuietly(channel);
    }

    /** Closes the socket. */
    public void close() {
        SocketChannel c = channel;
        channel = null;
        closeQuietly(c);
    }

    private static void closeQuietly(SocketChannel c) {
        if (c != null) {
            try {
                c.close();
            } catch (IOException ignored) {
                // Closing a broken socket can fail; it is closed either way.
            }
        }
    }
}
