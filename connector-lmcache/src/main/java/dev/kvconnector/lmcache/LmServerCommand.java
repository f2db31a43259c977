package dev.kvconnector.lmcache;

import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.StoreUri;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvctl lmserver}: runs an {@link LmCacheServer} in the foreground until the process is stopped
 * (Ctrl-C or SIGTERM).
 *
 * <pre>
 * kvctl lmserver --port 65432 --protocol v1 --capacity 4GiB --host 127.0.0.1 --payload-timeout 10s
 * </pre>
 */
@Command(name = "lmserver", mixinStandardHelpOptions = true,
        description = "Runs an in-memory LMCache-protocol server (lm://) until stopped.")
public final class LmServerCommand implements Callable<Integer> {
    @Spec
    private CommandSpec spec;

    @Option(names = "--host", defaultValue = LmCacheServer.DEFAULT_HOST,
            description = "Address to bind (default: ${DEFAULT-VALUE}).")
    private String host;

    @Option(names = "--port", defaultValue = "65432",
            description = "TCP port; 0 picks a free one (default: ${DEFAULT-VALUE}).")
    private int port;

    @Option(names = "--protocol", defaultValue = "v1",
            description = "v0 (2024 server) or v1 (lmcache.v1.server) (default: ${DEFAULT-VALUE}).")
    private String protocol;

    @Option(names = "--capacity", defaultValue = "1GiB",
            description = "Most bytes of values to hold, such as 4GiB; least recently used entries are evicted "
                    + "(default: ${DEFAULT-VALUE}).")
    private String capacity;

    @Option(names = "--payload-timeout", defaultValue = "10s",
            description = "How long a PUT's payload or a GET's reply may make no progress before the connection is "
                    + "closed and its reservation given back, such as 10s or 500ms (default: ${DEFAULT-VALUE}).")
    private String payloadTimeout;

    private final CountDownLatch stopped = new CountDownLatch(1);

    @Override
    public Integer call() throws InterruptedException {
        LmCacheServer server;
        try {
            server = startServer();
        } catch (KVException e) {
            spec.commandLine().getErr().println(e.getMessage());
            return 2;
        }
        Runtime.getRuntime().addShutdownHook(Thread.ofPlatform().unstarted(() -> {
            server.stop();
            stopped.countDown();
        }));
        PrintWriter out = spec.commandLine().getOut();
        out.printf("lmserver listening on %s:%d (protocol %s, capacity %d bytes); Ctrl-C stops it%n", host,
                server.boundPort(), server.protocol().label(), server.capacityBytes());
        out.flush();
        stopped.await();
        return 0;
    }

    /** Starts the server the options describe; the caller stops it. */
    LmCacheServer startServer() {
        return LmCacheServer.builder().host(host).port(port).protocol(LmProtocolVersion.parse(protocol))
                .capacityBytes(StoreUri.parseSize("--capacity", capacity, "lmserver"))
                .payloadTimeoutMillis(StoreUri.parseDurationMillis("--payload-timeout", payloadTimeout, "lmserver"))
                .build().start();
    }
}
