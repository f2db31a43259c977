package dev.kvconnector.valkey.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A real {@code redis-server} (or {@code valkey-server}) process for tests: bound to a free 127.0.0.1 port,
 * without persistence, its output in a temporary log. {@link #close()} always stops it, and a JVM shutdown hook
 * kills any still running.
 *
 * <p>When no server binary is on the PATH, {@link #start} fails the test under {@code CI=true} and aborts it
 * otherwise, with the install command as the reason.
 */
public final class RedisServerProcess implements AutoCloseable {
    private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly)));
    }

    private final Path binary;
    private final List<String> extraArgs;
    private final String password;
    private final Path dir;
    private int port;
    private Process process;

    private RedisServerProcess(Path binary, List<String> extraArgs, String password, Path dir) {
        this.binary = binary;
        this.extraArgs = extraArgs;
        this.password = password;
        this.dir = dir;
    }

    /** Starts a server with extra arguments such as {@code "--maxmemory", "2mb"}. */
    public static RedisServerProcess start(String... extraArgs) {
        return startWithPassword(null, extraArgs);
    }

    /** Starts a server with {@code requirepass} (when {@code password} is not null) and extra arguments. */
    public static RedisServerProcess startWithPassword(String password, String... extraArgs) {
        Path bin = findBinary();
        try {
            RedisServerProcess p = new RedisServerProcess(bin, List.of(extraArgs), password,
                    Files.createTempDirectory("kvc-redis-"));
            p.port = freePort();
            p.launch();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException("cannot start " + bin, e);
        }
    }

    /** Starts a server on a given port, such as a cluster node whose bus port (port + 10000) must be free too. */
    public static RedisServerProcess startOnPort(int port, String... extraArgs) {
        Path bin = findBinary();
        try {
            RedisServerProcess p = new RedisServerProcess(bin, List.of(extraArgs), null,
                    Files.createTempDirectory("kvc-redis-"));
            p.port = port;
            p.launch();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException("cannot start " + bin, e);
        }
    }

    /** The server binary on the PATH, or a failed or aborted test. */
    public static Path findBinary() {
        for (String name : new String[] {"valkey-server", "redis-server"}) {
            for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
                Path p = Path.of(dir, name);
                if (!dir.isEmpty() && Files.isExecutable(p)) {
                    return p;
                }
            }
        }
        String reason = "redis-server is not installed: apt-get install -y redis-server";
        if ("true".equalsIgnoreCase(System.getenv("CI"))) {
            fail(reason);
        }
        Assumptions.abort(reason);
        throw new AssertionError("unreachable");
    }

    /** A TCP port that was free on 127.0.0.1 a moment ago. */
    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private void launch() throws IOException {
        List<String> cmd = new ArrayList<>(List.of(binary.toString(), "--port", Integer.toString(port),
                "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.toString(),
                "--daemonize", "no", "--protected-mode", "no"));
        if (password != null) {
            cmd.add("--requirepass");
            cmd.add(password);
        }
        cmd.addAll(extraArgs);
        Path log = dir.resolve("server-" + port + ".log");
        process = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        LIVE.add(process);
        awaitPong(log);
    }

    private void awaitPong(Path log) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("redis-server exited with " + process.exitValue() + ": "
                        + Files.readString(log));
            }
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 500);
                s.setSoTimeout(1000);
                OutputStream out = s.getOutputStream();
                out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                InputStream in = s.getInputStream();
                byte[] b = new byte[64];
                int n = in.read(b);
                String reply = n > 0 ? new String(b, 0, n, StandardCharsets.US_ASCII) : "";
                if (reply.startsWith("+PONG") || reply.startsWith("-NOAUTH")) {
                    return;
                }
            } catch (IOException notYet) {
                sleep(20);
            }
        }
        close();
        throw new IllegalStateException("redis-server on port " + port + " did not answer PING in 15 s: "
                + Files.readString(log));
    }

    /** What the server printed so far, for failure messages. */
    public String log() {
        try {
            return Files.readString(dir.resolve("server-" + port + ".log"));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    /** The TCP port. */
    public int port() {
        return port;
    }

    /** {@code 127.0.0.1:port}. */
    public String hostPort() {
        return "127.0.0.1:" + port;
    }

    /** The process id. */
    public long pid() {
        return process.pid();
    }

    /** Kills the server with SIGKILL and waits for it to die. */
    public void kill() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        LIVE.remove(process);
    }

    /** Starts the server again on the same port, after {@link #kill()}; the data is gone. */
    public void restart() {
        kill();
        try {
            launch();
        } catch (IOException e) {
            throw new IllegalStateException("cannot restart redis-server on port " + port, e);
        }
    }

    /** Stops the process with SIGSTOP: it keeps its sockets but answers nothing. */
    public void pause() {
        signal("STOP");
    }

    /** Resumes a paused process with SIGCONT. */
    public void resume() {
        signal("CONT");
    }

    private void signal(String sig) {
        try {
            Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid())).inheritIO().start();
            if (!k.waitFor(5, TimeUnit.SECONDS) || k.exitValue() != 0) {
                throw new IllegalStateException("kill -" + sig + " " + process.pid() + " failed");
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot run kill -" + sig, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Runs {@code redis-cli} style commands without our client: sends one inline command and returns the first
     * reply line, so that tests set up the server independently of the code under test.
     */
    public String command(String... args) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 2000);
            s.setSoTimeout(5000);
            StringBuilder req = new StringBuilder();
            if (password != null) {
                appendCommand(req, "AUTH", password);
            }
            appendCommand(req, args);
            s.getOutputStream().write(req.toString().getBytes(StandardCharsets.UTF_8));
            InputStream in = s.getInputStream();
            String line = readLine(in);
            if (password != null) {
                line = readLine(in);
            }
            return line;
        } catch (IOException e) {
            throw new IllegalStateException("cannot send a command to port " + port, e);
        }
    }

    private static void appendCommand(StringBuilder b, String... args) {
        b.append('*').append(args.length).append("\r\n");
        for (String a : args) {
            b.append('$').append(a.getBytes(StandardCharsets.UTF_8).length).append("\r\n").append(a).append("\r\n");
        }
    }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        int c;
        while ((c = in.read()) >= 0 && c != '\n') {
            if (c != '\r') {
                b.append((char) c);
            }
        }
        return b.toString();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops the server (SIGCONT first, in case it was paused) and deletes its directory. */
    @Override
    public void close() {
        if (process != null && process.isAlive()) {
            resume();
            kill();
        }
        try (var files = Files.walk(dir)) {
            files.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
        } catch (IOException ignored) {
            // A leftover temp directory is harmless.
        }
    }
}
