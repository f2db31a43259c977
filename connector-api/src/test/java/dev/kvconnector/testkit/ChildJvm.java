package dev.kvconnector.testkit;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A test's helper process: {@code java -cp <this class path> MAIN args...} in its own JVM, with its output collected
 * line by line, so the test can wait for the line that says the child reached a point. Close it, or {@link #kill()}
 * it, to kill -9 it. Modules subclass it to name their child's main class and JVM options.
 */
public class ChildJvm implements AutoCloseable {
    private static final long KILL_WAIT_SECONDS = 30;

    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    /** Collects {@code process}'s output (stderr merged into stdout) from now on. */
    protected ChildJvm(Process process) {
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
        }, "child-output-" + process.pid());
        pump.setDaemon(true);
        pump.start();
    }

    /**
     * Starts {@code java --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -XX:TieredStopAtLevel=1 jvmOptions...
     * -cp <this class path> main args...}, stderr merged into stdout; small and quick to start, as helpers are.
     */
    protected static Process launch(Class<?> main, List<String> jvmOptions, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.addAll(jvmOptions);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(main.getName());
        cmd.addAll(args);
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    /** The child's pid. */
    public long pid() {
        return process.pid();
    }

    /** Writes {@code line} and a newline to the child's stdin, for a child that takes commands there. */
    public void send(String line) throws IOException {
        OutputStream in = process.getOutputStream();
        in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        in.flush();
    }

    /** Waits for a line that starts with {@code prefix} and returns it; fails after {@code seconds}. */
    public String await(String prefix, long seconds) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            long left = end - System.nanoTime();
            String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                throw new AssertionError("child " + pid() + " printed no line starting with '" + prefix + "' in "
                        + seconds + " s; output:\n" + output());
            }
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** Waits for the exit and returns the exit code; fails after {@code seconds}. */
    public int exitCode(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            throw new AssertionError("child " + pid() + " still runs after " + seconds + " s; output:\n" + output());
        }
        return process.exitValue();
    }

    /**
     * SIGKILL, and waits until the process is gone (reaped, so its pid no longer answers); fails if it is not gone
     * after 30 s, since a test that kills a child next relies on the child being found dead.
     */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(KILL_WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new AssertionError("child " + pid() + " still runs " + KILL_WAIT_SECONDS + " s after SIGKILL; "
                    + "output:\n" + output());
        }
    }

    /** Everything the child printed so far, one line per line. */
    public String output() {
        synchronized (all) {
            return String.join("\n", all);
        }
    }

    /** Kills the child if it still runs. */
    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
