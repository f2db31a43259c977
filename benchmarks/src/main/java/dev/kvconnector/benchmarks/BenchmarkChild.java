package dev.kvconnector.benchmarks;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM of a benchmark that measures servers from outside their process: it prints {@code READY} and what the
 * parent needs (ports, endpoints) on one line, then runs, answering commands on its stdin where it takes any, until
 * its stdin closes.
 */
final class BenchmarkChild implements AutoCloseable {
    static final String READY = "READY";
    final Process process;
    /** The words of the child's {@code READY} line after {@code READY}. */
    final String[] ready;
    private final BufferedReader out;

    private BenchmarkChild(Process process, String[] ready, BufferedReader out) {
        this.process = process;
        this.ready = ready;
        this.out = out;
    }

    /**
     * Starts {@code java --enable-native-access=ALL-UNNAMED jvmArgs... -cp classPath main args...}, on the CPUs
     * {@code cpus} (a {@code taskset} list) unless null, and waits for its {@code READY} line. Its stderr goes to
     * this JVM's.
     */
    static BenchmarkChild start(Class<?> main, String cpus, String classPath, List<String> jvmArgs, String... args)
            throws IOException {
        List<String> cmd = new ArrayList<>();
        if (cpus != null) {
            cmd.addAll(List.of("taskset", "-c", cpus));
        }
        cmd.add(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin",
                "java").toString()));
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(jvmArgs);
        cmd.add("-cp");
        cmd.add(classPath);
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        while (line != null && !line.startsWith(READY + " ")) {
            // The JVM's own messages (a flight recording starting) come first.
            System.err.println(line);
            line = out.readLine();
        }
        if (line == null) {
            p.destroyForcibly();
            throw new IOException("child JVM " + main.getSimpleName() + " " + String.join(" ", args)
                    + " exited before it was ready");
        }
        return new BenchmarkChild(p, line.substring(READY.length() + 1).split(" "), out);
    }

    /** The {@code i}-th word of the {@code READY} line as a port. */
    int port(int i) {
        return Integer.parseInt(ready[i]);
    }

    /** Sends one command line and returns the child's answer, its next line of output. */
    String command(String line) throws IOException {
        OutputStream in = process.getOutputStream();
        in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        in.flush();
        String answer = out.readLine();
        if (answer == null) {
            throw new IOException("child JVM " + process.pid() + " exited instead of answering '" + line + "'");
        }
        return answer;
    }

    /** Closes the child's stdin, which ends it, and kills it if it still runs 10 s later. */
    @Override
    public void close() throws InterruptedException, IOException {
        process.getOutputStream().close();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly();
        }
    }

    /** In a child: returns when the parent closes this JVM's stdin. */
    static void awaitParentGone() throws IOException {
        System.out.flush();
        while (System.in.read() >= 0) {
            // Runs until the parent closes this JVM's stdin.
        }
    }
}
