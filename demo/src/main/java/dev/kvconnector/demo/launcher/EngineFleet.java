package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.demo.EngineCommand;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * X prefill and Y decode engines, each an {@link EngineCommand} in its own child JVM on a loopback port it picks
 * itself, sharing one KV store. Closing stops them all: {@code destroy()} (the child's shutdown hook closes its
 * server and store), then {@code destroyForcibly()} after a grace period of {@value #GRACE_MS} ms.
 */
final class EngineFleet implements AutoCloseable {
    static final long GRACE_MS = 5_000;
    private static final String LISTENING = " listening on ";
    private static final String EVENTS = " KV events on ";
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * One child engine: its role name ({@code prefill-0}), process, base URI, log file, and where it publishes its KV
     * events ({@code PUB[,REPLAY]}, as the engine printed it), or null when it publishes none.
     */
    record Member(String name, Process process, URI uri, Path log, String events) {
    }

    private final List<Member> members = new ArrayList<>();
    /** Every child started, ready or not, in start order. */
    private final List<Child> started = new ArrayList<>();

    private record Child(String name, Process process, Path log) {
    }

    /**
     * Starts the engines and waits until every one answers {@code GET /health}; on any failure stops those
     * already started and throws.
     *
     * @param prefill number of producer instances
     * @param decode number of consumer instances
     * @param store the shared store URI
     * @param tiny the 2-layer test model instead of the 8-layer default
     * @param layerWise consumers load layer by layer
     * @param logDir where each child's stdout and stderr go
     * @param startTimeout how long a child may take to listen
     */
    static EngineFleet start(int prefill, int decode, String store, String scheme, boolean tiny, boolean layerWise,
            Path logDir, Duration startTimeout) throws IOException, InterruptedException {
        return start(prefill, decode, store, scheme, tiny, layerWise, List.of(), logDir, startTimeout);
    }

    /** As {@link #start(int, int, String, String, boolean, boolean, Path, Duration)}, with {@code engineArgs}
     * appended to every engine's flags (such as {@code --transport p2p}). */
    static EngineFleet start(int prefill, int decode, String store, String scheme, boolean tiny, boolean layerWise,
            List<String> engineArgs, Path logDir, Duration startTimeout) throws IOException, InterruptedException {
        return start(prefill, decode, store, scheme, tiny, layerWise, engineArgs, engineArgs, logDir, startTimeout);
    }

    /**
     * As {@link #start(int, int, String, String, boolean, boolean, List, Path, Duration)}, with {@code prefillArgs}
     * appended to the producers' flags and {@code decodeArgs} to the consumers'.
     */
    static EngineFleet start(int prefill, int decode, String store, String scheme, boolean tiny, boolean layerWise,
            List<String> prefillArgs, List<String> decodeArgs, Path logDir, Duration startTimeout)
            throws IOException, InterruptedException {
        EngineFleet fleet = new EngineFleet();
        try {
            Files.createDirectories(logDir);
            String suffix = layerWise ? "-layerwise" : "";
            for (int i = 0; i < prefill; i++) {
                fleet.launch("prefill-" + i, "kv_producer", store, scheme, tiny, layerWise, prefillArgs,
                        logDir.resolve("prefill-" + i + suffix + ".log"));
            }
            for (int i = 0; i < decode; i++) {
                fleet.launch("decode-" + i, "kv_consumer", store, scheme, tiny, layerWise, decodeArgs,
                        logDir.resolve("decode-" + i + suffix + ".log"));
            }
            fleet.awaitReady(startTimeout);
            return fleet;
        } catch (IOException | InterruptedException | RuntimeException e) {
            fleet.close();
            throw e;
        }
    }

    private void launch(String name, String role, String store, String scheme, boolean tiny, boolean layerWise,
            List<String> engineArgs, Path log) throws IOException {
        List<String> cmd = command(role, store, scheme, tiny, layerWise);
        cmd.addAll(engineArgs);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        started.add(new Child(name, p, log));
    }

    /**
     * The JVM options of every child engine. A child that runs out of heap exits at once
     * ({@code -XX:+ExitOnOutOfMemoryError}) instead of serving on half-broken: the fleet then sees it gone and the
     * demo fails, naming its log.
     */
    static List<String> jvmOptions() {
        return List.of("--enable-native-access=ALL-UNNAMED", "-Xmx512m", "-XX:+ExitOnOutOfMemoryError");
    }

    /** The command line of one child engine: this JVM's {@code java}, {@link #jvmOptions()}, the engine's flags. */
    static List<String> command(String role, String store, String scheme, boolean tiny, boolean layerWise) {
        List<String> cmd = new ArrayList<>();
        cmd.add(javaExecutable());
        cmd.addAll(jvmOptions());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), EngineCommand.class.getName(), "--host",
                "127.0.0.1", "--port", "0", "--role", role, "--store", store, "--scheme", scheme,
                // Under load a producer's prompt can take many seconds; a consumer waiting per layer must outlast it.
                "--layer-timeout-ms", "120000"));
        if (tiny) {
            cmd.add("--tiny");
        }
        if (layerWise) {
            cmd.add("--layer-wise");
        }
        return cmd;
    }

    private void awaitReady(Duration timeout) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build()) {
            for (Child c : started) {
                Process p = c.process();
                Path log = c.log();
                URI uri;
                while ((uri = listeningUri(log)) == null) {
                    if (!p.isAlive()) {
                        throw failed(c.name(), "exited with " + p.exitValue() + " before it listened", log);
                    }
                    if (System.nanoTime() > deadline) {
                        throw failed(c.name(), "did not listen within " + timeout.toSeconds() + " s", log);
                    }
                    Thread.sleep(50);
                }
                awaitHealth(http, c.name(), uri, log, deadline);
                members.add(new Member(c.name(), p, uri, log, logged(log, EVENTS)));
            }
        }
    }

    private static void awaitHealth(HttpClient http, String name, URI uri, Path log, long deadline)
            throws IOException, InterruptedException {
        HttpRequest health = HttpRequest.newBuilder(uri.resolve("/health")).timeout(Duration.ofSeconds(5)).GET().build();
        while (true) {
            try {
                if (http.send(health, HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                if (System.nanoTime() > deadline) {
                    throw failed(name, "GET " + uri.resolve("/health") + " failed: " + e, log);
                }
            }
            if (System.nanoTime() > deadline) {
                throw failed(name, "GET " + uri.resolve("/health") + " never answered 200", log);
            }
            Thread.sleep(100);
        }
    }

    private static URI listeningUri(Path log) throws IOException {
        String uri = logged(log, LISTENING);
        return uri == null ? null : URI.create(uri);
    }

    /** What an engine printed after {@code marker} on its first {@code engine ...} line with it, or null. */
    private static String logged(Path log, String marker) throws IOException {
        if (!Files.exists(log)) {
            return null;
        }
        for (String line : Files.readAllLines(log, StandardCharsets.UTF_8)) {
            int at = line.indexOf(marker);
            if (line.startsWith("engine ") && at > 0) {
                return line.substring(at + marker.length()).trim();
            }
        }
        return null;
    }

    /** Each engine's {@code GET /kv/metrics} answer, with its {@code name} and {@code uri} added. */
    List<ObjectNode> kvMetrics() throws IOException, InterruptedException {
        List<ObjectNode> out = new ArrayList<>();
        for (Member m : members) {
            out.add(kvMetrics(m.uri()).put("name", m.name()));
        }
        return out;
    }

    /** The {@code GET /kv/metrics} answer of the engine at {@code base}, with its {@code uri} added. */
    static ObjectNode kvMetrics(URI base) throws IOException, InterruptedException {
        URI uri = base.resolve("/kv/metrics");
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET()
                    .build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IOException("GET " + uri + " answered " + r.statusCode() + ": " + r.body());
            }
            return ((ObjectNode) JSON.readTree(r.body())).put("uri", base.toString());
        }
    }

    private static KVException failed(String name, String what, Path log) {
        return KVException.of(ErrorCode.IO_ERROR, "engine " + name + " " + what)
                .hint("read its log " + log + " (last lines: " + tail(log) + ")").build();
    }

    private static String tail(Path log) {
        try {
            // Stack frames say little; the exception lines name the cause.
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8).stream()
                    .filter(l -> !l.stripLeading().startsWith("at ") && !l.stripLeading().startsWith("...")).toList();
            return String.join(" | ", lines.subList(Math.max(0, lines.size() - 3), lines.size()));
        } catch (IOException e) {
            return "unreadable: " + e.getMessage();
        }
    }

    /** The JVM running this process, so children share its version and flags' meaning. */
    static String javaExecutable() {
        return ProcessHandle.current().info().command()
                .orElse(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    }

    /** The engines, prefill first, once all answer {@code /health}. */
    List<Member> members() {
        return List.copyOf(members);
    }

    @Override
    public void close() {
        for (Child c : started) {
            c.process().destroy();
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(GRACE_MS);
        for (Child c : started) {
            Process p = c.process();
            try {
                long left = Math.max(0, deadline - System.nanoTime());
                if (!p.waitFor(left, TimeUnit.NANOSECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(GRACE_MS, TimeUnit.MILLISECONDS);
                }
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
