package dev.kvconnector.store.shm;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A {@link ShmChild} in its own JVM, with its output collected line by line. Close it to kill it. */
final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    private ChildJvm(Process process) {
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

    /** Starts {@code java -cp <this class path> ShmChild args...} with the given system properties. */
    static ChildJvm start(Map<String, String> props, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Xmx64m");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-XX:TieredStopAtLevel=1");
        props.forEach((k, v) -> cmd.add("-D" + k + "=" + v));
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(ShmChild.class.getName());
        cmd.addAll(List.of(args));
        return new ChildJvm(new ProcessBuilder(cmd).redirectErrorStream(true).start());
    }

    long pid() {
        return process.pid();
    }

    /** Waits for a line that starts with {@code prefix} and returns it; fails after {@code seconds}. */
    String await(String prefix, long seconds) throws InterruptedException {
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
    int exitCode(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            throw new AssertionError("child " + pid() + " still runs after " + seconds + " s; output:\n" + output());
        }
        return process.exitValue();
    }

    /**
     * SIGKILL, and wait until the process is gone (reaped, so its pid no longer answers); fails if it is not gone
     * after 30 s, since every test that kills a child next relies on the store finding it dead.
     */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            throw new AssertionError("child " + pid() + " still runs 30 s after SIGKILL; output:\n" + output());
        }
    }

    String output() {
        synchronized (all) {
            return String.join("\n", all);
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
