package dev.kvconnector.mooncake.te;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A peer ({@link TePeer}, or the p2p tests' producer) in its own JVM, with its output collected line by line. Close
 * it, or {@link #kill()} it, to kill -9 it.
 */
public final class TeChildJvm implements AutoCloseable {
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    private TeChildJvm(Process process) {
        this.process = process;
        Thread pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (all) {
                        all.add(line);
                    }
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("PUMP-ERROR " + e);
            }
        }, "te-child-output-" + process.pid());
        pump.setDaemon(true);
        pump.start();
    }

    /** Starts {@code java -cp <this class path> TePeer args...}. */
    static TeChildJvm start(String... args) throws IOException {
        return start(TePeer.class, args);
    }

    /** Starts {@code java -cp <this class path> main args...}. */
    public static TeChildJvm start(Class<?> main, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Xmx128m");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        return new TeChildJvm(new ProcessBuilder(cmd).redirectErrorStream(true).start());
    }

    /** Waits for a line that starts with {@code prefix} and returns it; fails after {@code seconds}. */
    public String await(String prefix, long seconds) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            long left = end - System.nanoTime();
            String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                throw new AssertionError("child " + process.pid() + " printed no line starting with '" + prefix
                        + "' in " + seconds + " s; output:\n" + output());
            }
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** Waits for the exit and returns the exit code; fails after {@code seconds}. */
    public int exitCode(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            throw new AssertionError("child " + process.pid() + " still runs after " + seconds + " s; output:\n"
                    + output());
        }
        return process.exitValue();
    }

    public String output() {
        synchronized (all) {
            return String.join("\n", all);
        }
    }

    /** SIGKILL, and waits for the process to be gone. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
