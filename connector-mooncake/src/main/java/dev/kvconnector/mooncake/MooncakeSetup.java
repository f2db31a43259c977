package dev.kvconnector.mooncake;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sets a native client up without waiting out upstream's retries. Upstream's {@code setup} retries its client 20
 * times, about 4.4 s each, when {@code local_hostname} has no port, so a master that cannot be reached cost 134 s
 * before any error. Here {@link #probe} first opens a TCP connection to the master, and to the metadata server when
 * it is {@code http://}, under {@link MooncakeConfig#probeTimeoutMillis()}; then {@link #run} calls {@code setup}
 * on a thread of its own and waits at most {@link MooncakeConfig#setupTimeoutMillis()}.
 *
 * <p>A native call cannot be cancelled. When the deadline passes, the open fails with {@code TIMEOUT} and the call
 * is abandoned to its thread (a daemon, so it does not hold the JVM's exit): when it returns, that thread destroys
 * the client by closing its arena, and logs how long the call took.
 */
final class MooncakeSetup {
    private static final Logger LOG = LoggerFactory.getLogger(MooncakeSetup.class);
    private static final int RUNNING = 0;
    private static final int RETURNED = 1;
    private static final int ABANDONED = 2;

    /** The open failed at the setup deadline; the client's arena now belongs to the setup thread. */
    static final class Abandoned extends RuntimeException {
        private final KVException error;

        private Abandoned(KVException error) {
            super(error.getMessage(), error, false, false);
            this.error = error;
        }

        /** The error to report. */
        KVException error() {
            return error;
        }
    }

    private MooncakeSetup() {
    }

    /**
     * Opens, and closes at once, a TCP connection to the master and to an {@code http://} metadata server.
     *
     * @throws KVException {@code STORE_UNREACHABLE} naming the address, the deadline and what to check
     */
    static void probe(MooncakeConfig c, String uri) {
        long timeout = c.probeTimeoutMillis();
        if (timeout == 0) {
            return;
        }
        String master = c.masterServerAddress();
        int colon = master.lastIndexOf(':');
        connect("the Mooncake master", MooncakeConfig.hostOf(master), Integer.parseInt(master.substring(colon + 1)),
                timeout, uri, "is mooncake_master running there (its --rpc_address and --rpc_port), and does no "
                        + "firewall stand between? The master's address is the mooncake:// URI's host:port");
        String metadata = c.metadataServer().trim();
        if (metadata.toLowerCase(Locale.ROOT).startsWith("http://")) {
            URI u;
            try {
                u = new URI(metadata);
            } catch (URISyntaxException e) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "the metadata server '"
                                + StoreUri.maskRaw(metadata) + "' is not a URL").store(uri).operation("open")
                        .hint("write metadata=http://MASTER_HOST:8080/metadata").build();
            }
            if (u.getHost() == null) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "the metadata server '"
                                + StoreUri.maskRaw(metadata) + "' names no host").store(uri).operation("open")
                        .hint("write metadata=http://MASTER_HOST:8080/metadata").build();
            }
            int port = u.getPort() < 0 ? 80 : u.getPort();
            connect("the HTTP metadata server", u.getHost().replaceAll("^\\[|\\]$", ""), port, timeout, uri,
                    "is the master started with --enable_http_metadata_server=true and --http_metadata_server_port="
                            + port + "?");
        }
    }

    private static void connect(String what, String host, int port, long timeoutMillis, String uri, String check) {
        String address = host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), (int) Math.min(timeoutMillis, Integer.MAX_VALUE));
        } catch (IOException e) {
            throw KVException.of(ErrorCode.STORE_UNREACHABLE, "cannot reach " + what + " at " + address + " within "
                            + timeoutMillis + " ms: " + e.getMessage()).store(uri).operation("open").cause(e)
                    .hint(check + " (probe-timeout= sets this deadline; 0 skips the probe)").build();
        }
    }

    /**
     * Calls {@code setup} on its own thread and waits up to the setup deadline.
     *
     * @param clientArena the arena that owns {@code client}; closing it destroys the client
     * @param context what the setup was given, for the error (no secrets)
     * @return setup's return code: 0 or a negative Mooncake code
     * @throws Abandoned at the deadline, or when the waiting thread is interrupted; the setup thread then owns
     *     {@code clientArena} and closes it when the native call returns
     */
    static int run(MooncakeStoreLibrary lib, MemorySegment client, Arena clientArena, MooncakeConfig c, String uri,
                   String context) {
        AtomicInteger state = new AtomicInteger(RUNNING);
        CompletableFuture<Integer> result = new CompletableFuture<>();
        long started = System.nanoTime();
        Thread.ofPlatform().daemon().name("mooncake-setup").start(() -> {
            try {
                result.complete(lib.setup(client, c.localHostname(), c.metadataServer(), c.globalSegmentBytes(),
                        c.localBufferBytes(), c.protocol(), c.deviceName(), c.masterServerAddress()));
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
            if (!state.compareAndSet(RUNNING, RETURNED)) {
                clientArena.close();
                LOG.warn("{}: the setup abandoned at its deadline returned after {} ms ({}); its client is destroyed",
                        uri, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started),
                        result.isCompletedExceptionally() ? "an exception" : "code " + result.join());
            }
        });
        boolean interrupted = false;
        try {
            return result.get(c.setupTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | InterruptedException e) {
            interrupted = e instanceof InterruptedException;
            if (!state.compareAndSet(RUNNING, ABANDONED)) {
                return result.join();
            }
            throw new Abandoned(KVException.of(ErrorCode.TIMEOUT, (interrupted ? "interrupted while waiting for "
                            : "no answer within setup-timeout=" + c.setupTimeoutMillis() + " ms from ")
                            + "mooncake_store_setup (" + context + ")").store(uri).operation("setup")
                    .hint("is the master reachable from here, and does local_hostname name this host as the master "
                            + "reaches it? Without a port in local_hostname upstream retries 20 times, about 4.4 s "
                            + "each: give local_hostname=HOST:PORT. The abandoned call goes on in the background "
                            + "and its client is destroyed when it returns").build());
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            if (e.getCause() instanceof Error err) {
                throw err;
            }
            throw new IllegalStateException(e.getCause());
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
