package dev.kvconnector.benchmarks;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.proxy.KvEventEndpoint;
import dev.kvconnector.proxy.Policy;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.XpydProxy;
import dev.kvconnector.testkit.KvEventFloodPublisher;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * Issue 20's bad-input goal, measured: a flood of KV events (10^5 a second for 10 s, vLLM's wire format over ZMQ)
 * must not stall request handling; this reports the p99 overhead of the flood.
 *
 * <p>Four JVMs, so that what each costs is charged to it: this one sends a steady stream of requests and times each
 * one; a child serves a prefill and a decode instance ({@link LoadInstance}, answering at once); a child publishes the
 * events ({@link KvEventFloodPublisher}: kvconnector's {@code ZmqKvEventPublisher}, with replay); a child runs the
 * proxy under {@code --policy kv-aware}, subscribed to that publisher as the prefill instance's. The prompts are text
 * (the proxy's byte tokenizer hashes them into 256-token chunks) that the publisher first reports in P's cache, so
 * every request is hashed and matched against an index of {@code --window} chunks (10,000 by default) plus the
 * prompts' own. The flood stores a new chunk and evicts the one stored a window earlier, over and over, so the index
 * keeps its size.
 *
 * <p>Phases, one run: a warm-up (not recorded), {@code quiet}, {@code flood} (the publisher floods for the phase's
 * length), {@code after} (the same quiet load again, while whatever the proxy queued drains). Requests go out open
 * loop at {@code --requests-per-s} from {@code --clients} client threads, each on its own keep-alive connection, and
 * each one's latency runs from when it was due, not from when it was sent, so a stall delays the requests queued
 * behind it and shows in full (no coordinated omission). Per phase it prints p50, p99, p99.9 and the maximum, the
 * CPU the proxy's and the publisher's JVMs used (in cores), and from the proxy's {@code /metrics}: events applied,
 * messages and events dropped by its bounded queue, sequence gaps, resynchronisations, the largest event lag
 * sampled (every 100 ms: the time from the publisher sending a batch to the index applying it) and the largest
 * queue depth; then the overhead, flood less quiet. Series a proxy build lacks print as {@code -}.
 *
 * <p>Run it with {@code java -XX:+UseZGC --enable-native-access=ALL-UNNAMED -cp benchmarks/target/benchmarks.jar
 * dev.kvconnector.benchmarks.KvEventFloodBenchmark [--rate=100000] [--flood-s=10] [--quiet-s=10] [--warmup-s=10]
 * [--after-s=5] [--requests-per-s=400] [--clients=4] [--window=10000] [--prompts=64] [--prompt-tokens=1024]}. The
 * proxy JVM runs with {@code -XX:+UseZGC}, as {@code kvctl proxy} does; {@code -Dkvflood.proxyJvmArgs=...} replaces
 * that (a flight recording, another collector).
 */
public final class KvEventFloodBenchmark {
    private static final String MODEL = LoadInstance.MODEL;
    private static final int CHUNK_TOKENS = 256;
    private static final String CLASS_PATH = System.getProperty("java.class.path");
    private static final List<String> HARNESS_JVM = List.of("-XX:+UseZGC");
    private static final long HIGHEST = 60_000_000_000L;
    private static final String[] PHASES = {"quiet", "flood", "after"};

    private KvEventFloodBenchmark() {
    }

    /** Runs the benchmark, or in a child JVM the proxy ({@code proxy P D INSTANCE=PUB,REPLAY}). */
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("proxy")) {
            serveProxy(args[1], args[2], args[3]);
            return;
        }
        Map<String, Long> o = options(args);
        if (ManagementFactory.getGarbageCollectorMXBeans().stream().noneMatch(b -> b.getName().startsWith("ZGC"))) {
            System.err.println("KvEventFloodBenchmark: run it on ZGC (java -XX:+UseZGC ...): the load client's own "
                    + "collector pauses would show as the proxy's");
            System.exit(2);
        }
        System.out.printf("kv event flood: %,d events/s for %d s from a child JVM (vLLM's wire format over ZMQ), "
                + "%d requests/s from %d clients through a kv-aware proxy, index of %,d chunks + %d prompts of %d "
                + "tokens; %d cores; load average before: %s%n", o.get("rate"), o.get("flood-s"),
                o.get("requests-per-s"), o.get("clients"), o.get("window"), o.get("prompts"),
                o.get("prompt-tokens"), Runtime.getRuntime().availableProcessors(), Machine.loadAverage());
        byte[] root = new byte[32];
        new Random(20).nextBytes(root);
        try (BenchmarkChild instances = BenchmarkChild.start(ProxyLoadTest.class, null, CLASS_PATH, HARNESS_JVM,
                "instances", "0")) {
            String p = "127.0.0.1:" + instances.port(0);
            String d = "127.0.0.1:" + instances.port(1);
            try (BenchmarkChild publisher = BenchmarkChild.start(KvEventFloodPublisher.class, null, CLASS_PATH,
                    HARNESS_JVM, p, "GPU", Integer.toString(CHUNK_TOKENS), HexFormat.of().formatHex(root),
                    Long.toString(o.get("window")));
                 BenchmarkChild proxy = BenchmarkChild.start(KvEventFloodBenchmark.class, null, CLASS_PATH,
                         proxyJvmArgs(), "proxy", p, d, p + "=" + publisher.ready[0] + "," + publisher.ready[1])) {
                run(o, root, publisher, proxy);
            }
        }
    }

    private static Map<String, Long> options(String[] args) {
        Map<String, Long> o = new HashMap<>(Map.of("rate", 100_000L, "flood-s", 10L, "quiet-s", 10L, "warmup-s",
                10L, "after-s", 5L, "requests-per-s", 400L, "clients", 4L, "window", 10_000L, "prompts", 64L));
        o.put("prompt-tokens", 1024L);
        for (String a : args) {
            int eq = a.indexOf('=');
            String name = a.startsWith("--") && eq > 2 ? a.substring(2, eq) : null;
            if (name == null || !o.containsKey(name)) {
                throw new IllegalArgumentException("unknown argument '" + a + "'; the options are --" + String.join(
                        "=N --", o.keySet()) + "=N");
            }
            o.put(name, Long.parseLong(a.substring(eq + 1)));
        }
        return o;
    }

    private static void run(Map<String, Long> o, byte[] root, BenchmarkChild publisher, BenchmarkChild proxy)
            throws Exception {
        String proxyAddr = "127.0.0.1:" + proxy.port(0);
        List<byte[]> requests = new ArrayList<>();
        Random random = new Random(21);
        int promptChunks = 0;
        for (long i = 0; i < o.get("prompts"); i++) {
            byte[] prompt = new byte[o.get("prompt-tokens").intValue()];
            for (int k = 0; k < prompt.length; k++) {
                prompt[k] = (byte) ('a' + random.nextInt(26));
            }
            int[] tokens = new int[prompt.length];
            for (int k = 0; k < tokens.length; k++) {
                tokens[k] = prompt[k];
            }
            StringBuilder store = new StringBuilder("store");
            for (ChunkKeys c : KvcV1KeyScheme.planFromRoot(root, CHUNK_TOKENS, 0, RequestTokens.of(tokens)).chunks()) {
                store.append(' ').append(c.hashHex());
                promptChunks++;
            }
            expect(publisher.command(store.toString()), "STORED");
            requests.add(RawHttpConnection.completion(proxyAddr, "{\"model\":\"" + MODEL + "\",\"prompt\":\""
                    + new String(prompt, StandardCharsets.US_ASCII) + "\",\"max_tokens\":1}"));
        }
        expect(publisher.command("seed"), "SEEDED");
        long indexed = o.get("window") + promptChunks;
        try (Metrics metrics = new Metrics(proxyAddr)) {
            metrics.awaitIndexed(indexed);
            try (Load load = new Load(proxyAddr, requests, o.get("clients").intValue(), o.get("requests-per-s"))) {
                Thread.sleep(o.get("warmup-s") * 1000);
                Phase[] phases = new Phase[PHASES.length];
                for (int i = 0; i < PHASES.length; i++) {
                    Phase ph = new Phase(PHASES[i], load, metrics, proxy, publisher);
                    if (PHASES[i].equals("flood")) {
                        ph.publisherSays = expect(publisher.command("flood " + o.get("rate") + " "
                                + o.get("flood-s") * 1000), "FLOODED");
                    } else {
                        Thread.sleep(o.get(PHASES[i] + "-s") * 1000);
                    }
                    ph.end();
                    phases[i] = ph;
                }
                report(phases, metrics.scrape(), indexed, load);
            }
        }
    }

    private static String expect(String answer, String prefix) {
        if (!answer.startsWith(prefix)) {
            throw new IllegalStateException("the publisher answered '" + answer + "', not " + prefix);
        }
        return answer;
    }

    private static void report(Phase[] phases, Map<String, Double> end, long indexed, Load load) {
        System.out.printf("%-6s %8s %8s %8s %8s %8s  %7s %7s  %9s %8s %8s %5s %7s %8s %6s  %s%n", "phase",
                "requests", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "proxy", "pub", "applied", "dropped",
                "dropmsg", "gaps", "resyncs", "lag ms", "queue", "load average at end");
        for (Phase ph : phases) {
            Histogram h = ph.latency;
            System.out.printf("%-6s %8d %8.2f %8.2f %8.2f %8.2f  %7.2f %7.2f  %9s %8s %8s %5s %7s %8s %6s  %s%n",
                    ph.name, h.getTotalCount(), ms(h.getValueAtPercentile(50)), ms(h.getValueAtPercentile(99)),
                    ms(h.getValueAtPercentile(99.9)), ms(h.getMaxValue()), ph.proxyCores, ph.publisherCores,
                    ph.delta("xpyd_kv_events_total"), ph.delta("xpyd_kv_events_dropped_total"),
                    ph.delta("xpyd_kv_event_messages_dropped_total"), ph.delta("xpyd_kv_event_gaps_total"),
                    ph.delta("xpyd_kv_event_resyncs_total"), ph.maxSampled("xpyd_kv_event_lag_ms"),
                    ph.maxSampled("xpyd_kv_event_queue_messages"), ph.loadAverage);
        }
        Histogram quiet = phases[0].latency;
        Histogram flood = phases[1].latency;
        System.out.printf("overhead (flood less quiet): p50 %+.2f ms, p99 %+.2f ms, p99.9 %+.2f ms, max %+.2f ms%n",
                ms(flood.getValueAtPercentile(50) - quiet.getValueAtPercentile(50)),
                ms(flood.getValueAtPercentile(99) - quiet.getValueAtPercentile(99)),
                ms(flood.getValueAtPercentile(99.9) - quiet.getValueAtPercentile(99.9)),
                ms(flood.getMaxValue() - quiet.getMaxValue()));
        System.out.printf("publisher: %s; proxy at the end: %s chunks indexed (%d expected), %s cache-hit "
                + "decisions of %d requests, lag max %s ms; client reconnects %d; load average after: %s%n",
                phases[1].publisherSays, value(end, "xpyd_kv_index_chunks"), indexed,
                value(end, "xpyd_kv_route_decisions_total{reason=\"cache_hit\"}"), load.sent.get(),
                value(end, "xpyd_kv_event_lag_max_ms"), load.reconnects.get(), Machine.loadAverage());
    }

    private static String value(Map<String, Double> m, String name) {
        Double v = m.get(name);
        return v == null ? "-" : String.format("%.0f", v);
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    /** One phase's latencies, CPU and metrics, from its start to {@link #end}. */
    private static final class Phase {
        final String name;
        final long cpuStart;
        final long publisherCpuStart;
        final long startNanos = System.nanoTime();
        final Map<String, Double> before;
        final Load load;
        final Metrics metrics;
        final BenchmarkChild proxy;
        final BenchmarkChild publisher;
        Histogram latency;
        Map<String, Double> after;
        Map<String, Double> sampledMax;
        double proxyCores;
        double publisherCores;
        String loadAverage;
        String publisherSays = "-";

        Phase(String name, Load load, Metrics metrics, BenchmarkChild proxy, BenchmarkChild publisher)
                throws Exception {
            this.name = name;
            this.load = load;
            this.metrics = metrics;
            this.proxy = proxy;
            this.publisher = publisher;
            this.before = metrics.scrape();
            load.latency.getIntervalHistogram();
            metrics.startSampling();
            this.cpuStart = Machine.cpuNanos(proxy.process.toHandle());
            this.publisherCpuStart = Machine.cpuNanos(publisher.process.toHandle());
        }

        void end() throws Exception {
            double wall = System.nanoTime() - startNanos;
            proxyCores = (Machine.cpuNanos(proxy.process.toHandle()) - cpuStart) / wall;
            publisherCores = (Machine.cpuNanos(publisher.process.toHandle()) - publisherCpuStart) / wall;
            latency = load.latency.getIntervalHistogram();
            sampledMax = metrics.stopSampling();
            after = metrics.scrape();
            loadAverage = Machine.loadAverage();
        }

        String delta(String series) {
            Double a = after.get(series);
            Double b = before.get(series);
            return a == null || b == null ? "-" : String.format("%.0f", a - b);
        }

        String maxSampled(String series) {
            return value(sampledMax, series);
        }
    }

    /**
     * Open-loop requests: {@code clients} threads, each on its own keep-alive connection, each sending one request
     * every {@code clients / perSecond} s, its prompt the next of {@code requests}; each latency counts from when the
     * request was due.
     */
    private static final class Load implements AutoCloseable {
        final Recorder latency = new Recorder(HIGHEST, 3);
        final AtomicLong sent = new AtomicLong();
        final AtomicLong reconnects = new AtomicLong();
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private final List<Thread> threads = new ArrayList<>();
        private volatile boolean running = true;

        Load(String proxyAddr, List<byte[]> requests, int clients, long perSecond) {
            long interval = 1_000_000_000L * clients / perSecond;
            long start = System.nanoTime();
            for (int c = 0; c < clients; c++) {
                long first = start + interval * c / clients;
                int client = c;
                threads.add(Thread.ofPlatform().name("load-" + c).start(() -> {
                    RawHttpConnection conn = new RawHttpConnection(proxyAddr, reconnects);
                    try {
                        for (long i = 0; running; i++) {
                            long due = first + i * interval;
                            LockSupport.parkNanos(due - System.nanoTime());
                            conn.exchange(requests.get((int) ((i * clients + client) % requests.size())), false);
                            latency.recordValue(Math.min(System.nanoTime() - due, HIGHEST));
                            sent.incrementAndGet();
                        }
                    } catch (IOException | RuntimeException e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        conn.close();
                    }
                }));
            }
        }

        @Override
        public void close() throws Exception {
            running = false;
            for (Thread t : threads) {
                t.join();
            }
            if (failure.get() != null) {
                throw new IllegalStateException("a request failed: " + failure.get(), failure.get());
            }
        }
    }

    /** The proxy's {@code /metrics}, scraped, and sampled every 100 ms for the largest value of each gauge. */
    private static final class Metrics implements AutoCloseable {
        private static final long SAMPLE_MILLIS = 100;
        private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        private final HttpRequest request;
        private final Map<String, Double> sampledMax = new HashMap<>();
        private Thread sampler;
        private volatile boolean sampling;

        Metrics(String proxyAddr) {
            request = HttpRequest.newBuilder(URI.create("http://" + proxyAddr + "/metrics"))
                    .timeout(Duration.ofSeconds(10)).GET().build();
        }

        Map<String, Double> scrape() throws IOException, InterruptedException {
            HttpResponse<String> r = http.send(request, HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IOException(request.uri() + " answered " + r.statusCode());
            }
            Map<String, Double> m = new HashMap<>();
            for (String line : r.body().split("\n")) {
                int space = line.lastIndexOf(' ');
                if (!line.startsWith("#") && space > 0) {
                    m.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
                }
            }
            return m;
        }

        /** Waits until the index holds {@code chunks} chunks: the link is live and the seed applied. */
        void awaitIndexed(long chunks) throws IOException, InterruptedException {
            long deadline = System.nanoTime() + 60_000_000_000L;
            Double n;
            while ((n = scrape().get("xpyd_kv_index_chunks")) == null || n < chunks) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the proxy indexed " + n + " chunks in 60 s, not " + chunks);
                }
                Thread.sleep(200);
            }
        }

        void startSampling() {
            synchronized (sampledMax) {
                sampledMax.clear();
            }
            sampling = true;
            sampler = Thread.ofPlatform().daemon().name("metrics-sampler").start(() -> {
                while (sampling) {
                    try {
                        Map<String, Double> m = scrape();
                        synchronized (sampledMax) {
                            m.forEach((k, v) -> sampledMax.merge(k, v, Math::max));
                        }
                        Thread.sleep(SAMPLE_MILLIS);
                    } catch (IOException | InterruptedException e) {
                        return;
                    }
                }
            });
        }

        Map<String, Double> stopSampling() throws InterruptedException {
            sampling = false;
            sampler.join();
            synchronized (sampledMax) {
                return new HashMap<>(sampledMax);
            }
        }

        @Override
        public void close() {
            http.close();
        }
    }

    private static List<String> proxyJvmArgs() {
        String s = System.getProperty("kvflood.proxyJvmArgs", "-XX:+UseZGC");
        return s.isBlank() ? List.of() : List.of(s.trim().split("\\s+"));
    }

    private static void serveProxy(String p, String d, String kvEvents) throws IOException {
        try (XpydProxy proxy = new XpydProxy(ProxyConfig.builder(MODEL).port(0).bindHost("127.0.0.1").prefill(p)
                .decode(d).policy(Policy.KV_AWARE).kvEvents(KvEventEndpoint.parse(kvEvents))
                .healthInterval(Duration.ZERO).build()).start()) {
            System.out.println(BenchmarkChild.READY + " " + proxy.port());
            BenchmarkChild.awaitParentGone();
        }
    }
}
