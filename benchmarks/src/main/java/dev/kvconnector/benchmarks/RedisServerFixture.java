package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@code redis-server} (or {@code valkey-server}) started for one trial on a free 127.0.0.1 port, with
 * persistence off ({@code --save "" --appendonly no}) so no fork or disk write lands inside a measurement, and
 * stopped at {@link #close}. The binary is {@code $KVC_REDIS_SERVER}, else the first of {@code redis-server} and
 * {@code valkey-server} on the {@code PATH}.
 */
public final class RedisServerFixture implements AutoCloseable {
    private static final long START_TIMEOUT_MS = 10_000;
    /**
     * jemalloc options for the server, unless the environment sets {@code MALLOC_CONF}: keep freed pages instead of
     * returning them to the kernel. By default jemalloc purges freed memory after a decay time, and at once for
     * allocations of 8 MiB and more; the next request's values then land on fresh pages, one page fault per 4 KiB.
     * On this project's VM a fault on a fresh page costs 40-75 us (measured), so a 16 MiB SET faulted 8,196 pages
     * (its value and the next query buffer) and ran 6-10x slower than with this setting, and a request of 128 MiB
     * of new keys faulted 25,000 pages: the benchmark measured the hypervisor, not the client. Every client here
     * (ours, Lettuce, Jedis) gets the same server. Read by Debian's redis-server, which links the system jemalloc.
     */
    static final String MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1";

    private final Process process;
    private final int port;
    private final Path dir;

    private RedisServerFixture(Process process, int port, Path dir) {
        this.process = process;
        this.port = port;
        this.dir = dir;
    }

    /** The server binary that {@link #start} would run, or null when there is none. */
    public static Path findServer() {
        String explicit = System.getenv("KVC_REDIS_SERVER");
        if (explicit != null && !explicit.isBlank()) {
            Path p = Path.of(explicit);
            return Files.isExecutable(p) ? p : null;
        }
        String path = System.getenv().getOrDefault("PATH", "");
        for (String name : List.of("redis-server", "valkey-server")) {
            for (String d : path.split(":")) {
                Path p = Path.of(d.isEmpty() ? "." : d, name);
                if (Files.isExecutable(p)) {
                    return p;
                }
            }
        }
        return null;
    }

    /** Starts a server and waits until it answers PING. */
    public static RedisServerFixture start() {
        Path bin = findServer();
        if (bin == null) {
            throw new IllegalStateException("no redis-server or valkey-server on the PATH and KVC_REDIS_SERVER unset; "
                    + "install one (apt-get install redis-server) or leave Lettuce, Jedis and valkey:// out");
        }
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("kvc-bench-redis");
            ProcessBuilder pb = new ProcessBuilder(bin.toString(), "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", dir.toString(), "--daemonize", "no",
                    "--loglevel", "warning")
                    .redirectErrorStream(true).redirectOutput(dir.resolve("server.log").toFile());
            pb.environment().putIfAbsent("MALLOC_CONF", MALLOC_CONF);
            Process p = pb.start();
            RedisServerFixture f = new RedisServerFixture(p, port, dir);
            try {
                f.awaitPing();
            } catch (RuntimeException e) {
                f.close();
                throw e;
            }
            return f;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + bin, e);
        }
    }

    /** {@code 127.0.0.1:port}. */
    public String hostPort() {
        return "127.0.0.1:" + port;
    }

    /** The port the server listens on. */
    public int port() {
        return port;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private void awaitPing() {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_TIMEOUT_MS);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("redis-server exited with " + process.exitValue() + " on port " + port
                        + "; see " + dir.resolve("server.log"));
            }
            try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
                s.setSoTimeout(1000);
                OutputStream out = s.getOutputStream();
                out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                InputStream in = s.getInputStream();
                byte[] reply = in.readNBytes(7);
                if (new String(reply, StandardCharsets.US_ASCII).equals("+PONG\r\n")) {
                    return;
                }
            } catch (IOException notYet) {
                // Not listening yet: retry until the deadline.
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        throw new IllegalStateException("redis-server on port " + port + " did not answer PING within "
                + START_TIMEOUT_MS + " ms; see " + dir.resolve("server.log"));
    }

    /** Stops the server (TERM, then KILL after 5 s) and removes its directory. */
    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            System.err.println("could not remove " + dir + ": " + e);
        }
    }
}
