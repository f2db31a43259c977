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
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Predicate;
import org.HdrHistogram.Histogram;

/**
 * Issue 20's bad-input goal, measured: a flood of KV events (10^5 a second for 10 s, vLLM's wire format over ZMQ)
 * must not stall request handling; this reports the p99 overhead of the flood.
 *
 * <p>Four JVMs (six with a baseline), so that what each costs is charged to it: this one sends a steady stream of requests and times each
 * one; a child serves a prefill and a decode instance ({@link LoadInstance}, answering at once); a child publishes the
 * events ({@link KvEventFloodPublisher}: kvconnector's {@code ZmqKvEventPublisher}, with replay); a child runs the
 * proxy under {@code --policy kv-aware}, subscribed to that publisher as the prefill instance's. The prompts are text
 * (the proxy's byte tokenizer hashes them into 256-token chunks) that the publisher first reports in P's cache, so
 * every request is hashed and matched against an index of {@code --window} chunks (10,000 by default) plus the
 * prompts' own. The flood stores a new chunk and evicts the one stored a window earlier, over and over, so the index
 * keeps its size.
 *
 * <p>Phases, each round: {@code quiet}, {@code flood} (the publisher floods for the phase's length), {@code after}
 * (the same quiet load again, while whatever the proxy queued drains); the first round starts with a warm-up of
 * {@code --warmup-s}, later ones with 2 s, of load not recorded. Requests go out open loop at
 * {@code --requests-per-s} from {@code --clients} client threads, each on its own keep-alive connection, and each
 * one's latency runs from when it was due, not from when it was sent, so a stall delays the requests queued behind it
 * and shows in full (no coordinated omission). Per phase it prints p50, p99, p99.9 and the maximum, the CPU (in cores)
 * of the proxy's JVM, of its KV event threads and of its collector's threads (from {@code /proc}), and of the
 * publisher's JVM, and from the proxy's {@code /metrics}: events applied, events and
 * messages dropped by its bounded queue, sequence gaps, resynchronisations, the largest event lag sampled (every
 * 100 ms: the time from the publisher sending a batch to the index applying it) and the largest queue depth sampled;
 * then the overhead, flood less quiet. Series a proxy build lacks print as {@code -}.
 *
 * <p>{@code --baseline=JAR} measures another build's proxy (a {@code benchmarks.jar} that has this class) in the same
 * run, with a publisher of its own: each round measures the baseline, then this build, so both meet the machine as it
 * is then. The summary at the end merges each one's rounds.
 *
 * <p>Run it with {@code java -XX:+UseZGC --enable-native-access=ALL-UNNAMED -cp benchmarks/target/benchmarks.jar
 * dev.kvconnector.benchmarks.KvEventFloodBenchmark [--rate=100000] [--flood-s=10] [--quiet-s=10] [--warmup-s=10]
 * [--after-s=5] [--requests-per-s=400] [--clients=4] [--window=10000] [--prompts=64] [--prompt-tokens=1024]
 * [--rounds=1] [--baseline=JAR]}. The proxy JVM runs with {@code -XX:+UseZGC}, as {@code kvctl proxy} does;
 * {@code -Dkvflood.proxyJvmArgs=...} replaces that (a flight recording, another collector).
 */
public final class KvEventFloodBenchmark {
    private static final String MODEL = LoadInstance.MODEL;
    private static final int CHUNK_TOKENS = 256;
    private static final String CLASS_PATH = System.getProperty("java.class.path");
    private static final List<String> HARNESS_JVM = List.of("-XX:+UseZGC");
    private static final String[] PHASES = {"quiet", "flood", "after"};
    /** The proxy's KV event threads, as {@code /proc} names them (cut to 15 characters). */
    private static final Predicate<String> EVENT_THREADS = n -> n.startsWith("kvconnector-kv");
    /** The collector's threads: ZGC's (Z...), G1's and Parallel's. */
    private static final Predicate<String> GC_THREADS = n -> n.startsWith("Z") || n.startsWith("GC Thread")
            || n.startsWith("G1 ");

    private KvEventFloodBenchmark() {
    }

    /** Runs the benchmark, or in a child JVM the proxy ({@code proxy P D INSTANCE=PUB,REPLAY}). */
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("proxy")) {
            serveProxy(args[1], args[2], args[3]);
            return;
        }
        String baseline = null;
        List<String> numeric = new ArrayList<>();
        for (String a : args) {
            if (a.startsWith("--baseline=")) {
                baseline = a.substring("--baseline=".length());
            } else {
                numeric.add(a);
            }
        }
        Map<String, Long> o = options(numeric);
        if (ManagementFactory.getGarbageCollectorMXBeans().stream().noneMatch(b -> b.getName().startsWith("ZGC"))) {
            System.err.println("KvEventFloodBenchmark: run it on ZGC (java -XX:+UseZGC ...): the load client's own "
                    + "collector pauses would show as the proxy's");
            System.exit(2);
        }
        System.out.printf("kv event flood: %,d events/s for %d s from a child JVM (vLLM's wire format over ZMQ), "
                + "%d requests/s from %d clients through a kv-aware proxy, index of %,d chunks + %d prompts of %d "
                + "tokens, %d round(s)%s; %d cores; load average before: %s%n", o.get("rate"), o.get("flood-s"),
                o.get("requests-per-s"), o.get("clients"), o.get("window"), o.get("prompts"),
                o.get("prompt-tokens"), o.get("rounds"), baseline == null ? "" : ", against the proxy of " + baseline,
                Runtime.getRuntime().availableProcessors(), Machine.loadAverage());
        byte[] root = new byte[32];
        new Random(20).nextBytes(root);
        List<Subject> subjects = new ArrayList<>();
        try (BenchmarkChild instances = BenchmarkChild.start(ProxyLoadTest.class, null, CLASS_PATH, HARNESS_JVM,
                "instances", "0")) {
            String p = "127.0.0.1:" + instances.port(0);
            String d = "127.0.0.1:" + instances.port(1);
            if (baseline != null) {
                subjects.add(new Subject("baseline", baseline, p, d, root, o));
            }
            subjects.add(new Subject("this build", CLASS_PATH, p, d, root, o));
            for (long r = 0; r < o.get("rounds"); r++) {
                for (Subject s : subjects) {
                    s.round(o, r == 0 ? o.get("warmup-s") : LEAD_IN_SECONDS);
                }
            }
            for (Subject s : subjects) {
                s.report();
            }
            System.out.printf("load average after: %s%n", Machine.loadAverage());
        } finally {
            for (Subject s : subjects) {
                s.close();
            }
        }
    }

    private static Map<String, Long> options(List<String> args) {
        Map<String, Long> o = new HashMap<>(Map.of("rate", 100_000L, "flood-s", 10L, "quiet-s", 10L, "warmup-s",
                10L, "after-s", 5L, "requests-per-s", 400L, "clients", 4L, "window", 10_000L, "prompts", 64L));
        o.put("prompt-tokens", 1024L);
        o.put("rounds", 1L);
        for (String a : args) {
            int eq = a.indexOf('=');
            String name = a.startsWith("--") && eq > 2 ? a.substring(2, eq) : null;
            if (name == null || !o.containsKey(name)) {
                throw new IllegalArgumentException("unknown argument '" + a + "'; the options are --" + String.join(
                        "=N --", o.keySet()) + "=N and --baseline=JAR");
            }
            o.put(name, Long.parseLong(a.substring(eq + 1)));
        }
        return o;
    }

    /** Seconds of load before a later round's quiet phase, not recorded: the proxy's idle upstream links reopen. */
    private static final long LEAD_IN_SECONDS = 2;

    /** A proxy under test, with a publisher of its own, and what its rounds measured. */
    private static final class Subject implements AutoCloseable {
        final String name;
        final BenchmarkChild publisher;
        final BenchmarkChild proxy;
        final String proxyAddr;
        final List<byte[]> requests = new ArrayList<>();
        final MetricsScraper metrics;
        final long indexed;
        final Histogram[] latency = new Histogram[PHASES.length];
        final List<String> rounds = new ArrayList<>();

        Subject(String name, String proxyClassPath, String p, String d, byte[] root, Map<String, Long> o)
                throws Exception {
            this.name = name;
            this.publisher = BenchmarkChild.start(KvEventFloodPublisher.class, null, CLASS_PATH, HARNESS_JVM, p,
                    "GPU", Integer.toString(CHUNK_TOKENS), HexFormat.of().formatHex(root),
                    Long.toString(o.get("window")));
            this.proxy = BenchmarkChild.start(KvEventFloodBenchmark.class, null, proxyClassPath, proxyJvmArgs(),
                    "proxy", p, d, p + "=" + publisher.ready[0] + "," + publisher.ready[1]);
            this.proxyAddr = "127.0.0.1:" + proxy.port(0);
            this.metrics = new MetricsScraper(proxyAddr);
            Random random = new Random(21);
            long promptChunks = 0;
            for (long i = 0; i < o.get("prompts"); i++) {
                byte[] prompt = new byte[o.get("prompt-tokens").intValue()];
                int[] tokens = new int[prompt.length];
                for (int k = 0; k < prompt.length; k++) {
                    prompt[k] = (byte) ('a' + random.nextInt(26));
                    tokens[k] = prompt[k];
                }
                StringBuilder store = new StringBuilder("store");
                for (ChunkKeys c : KvcV1KeyScheme.planFromRoot(root, CHUNK_TOKENS, 0, RequestTokens.of(tokens))
                        .chunks()) {
                    store.append(' ').append(c.hashHex());
                    promptChunks++;
                }
                expect(publisher.command(store.toString()), "STORED");
                requests.add(RawHttpConnection.completion(proxyAddr, "{\"model\":\"" + MODEL + "\",\"prompt\":\""
                        + new String(prompt, StandardCharsets.US_ASCII) + "\",\"max_tokens\":1}"));
            }
            expect(publisher.command("seed"), "SEEDED");
            this.indexed = o.get("window") + promptChunks;
            metrics.awaitIndexed(indexed);
        }

        /** One round: {@code leadIn} s of load unrecorded, then the phases, each printed as it ends. */
        void round(Map<String, Long> o, long leadIn) throws Exception {
            System.out.printf("%s, round %d%n", name, rounds.size() + 1);
            System.out.printf("  %-6s %8s %8s %8s %8s %8s  %6s %6s %6s %6s  %9s %8s %7s %5s %7s %7s %6s  %s%n",
                    "phase", "requests", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "proxy", "events", "gc", "pub",
                    "applied", "dropped", "dropmsg", "gaps", "resyncs", "lag ms", "queue", "load average at end");
            Histogram[] h = new Histogram[PHASES.length];
            long reconnects;
            try (OpenLoopClients load = new OpenLoopClients(proxyAddr, requests, o.get("clients").intValue(), o.get("requests-per-s"))) {
                Thread.sleep(leadIn * 1000);
                for (int i = 0; i < PHASES.length; i++) {
                    Phase ph = new Phase(PHASES[i], load, metrics, proxy, publisher);
                    if (PHASES[i].equals("flood")) {
                        ph.publisherSays = expect(publisher.command("flood " + o.get("rate") + " "
                                + o.get("flood-s") * 1000), "FLOODED");
                    } else {
                        Thread.sleep(o.get(PHASES[i] + "-s") * 1000);
                    }
                    ph.end();
                    ph.print();
                    h[i] = ph.latency;
                    if (latency[i] == null) {
                        latency[i] = new Histogram(OpenLoopClients.HIGHEST, 3);
                    }
                    latency[i].add(h[i]);
                }
                reconnects = load.reconnects.get();
            }
            Map<String, Double> end = metrics.scrape();
            String overhead = overhead(h[0], h[1]);
            rounds.add(overhead);
            System.out.printf("  overhead (flood less quiet): %s; at the end %s chunks indexed (%d expected), %s "
                    + "cache-hit decisions in all, lag max %s ms, %d client reconnects%n", overhead,
                    value(end, "xpyd_kv_index_chunks"), indexed,
                    value(end, "xpyd_kv_route_decisions_total{reason=\"cache_hit\"}"),
                    value(end, "xpyd_kv_event_lag_max_ms"), reconnects);
        }

        void report() {
            System.out.printf("%s, %d round(s) together: quiet p50/p99/p99.9 %s ms, flood %s ms, after %s ms; "
                    + "overhead %s; per round: %s%n", name, rounds.size(), percentiles(latency[0]),
                    percentiles(latency[1]), percentiles(latency[2]), overhead(latency[0], latency[1]),
                    String.join(" | ", rounds));
        }

        @Override
        public void close() throws Exception {
            metrics.close();
            proxy.close();
            publisher.close();
        }
    }

    private static String percentiles(Histogram h) {
        return String.format("%.2f/%.2f/%.2f", ms(h.getValueAtPercentile(50)), ms(h.getValueAtPercentile(99)),
                ms(h.getValueAtPercentile(99.9)));
    }

    private static String overhead(Histogram quiet, Histogram flood) {
        return String.format("p50 %+.2f ms, p99 %+.2f ms, p99.9 %+.2f ms",
                ms(flood.getValueAtPercentile(50) - quiet.getValueAtPercentile(50)),
                ms(flood.getValueAtPercentile(99) - quiet.getValueAtPercentile(99)),
                ms(flood.getValueAtPercentile(99.9) - quiet.getValueAtPercentile(99.9)));
    }

    private static String expect(String answer, String prefix) {
        if (!answer.startsWith(prefix)) {
            throw new IllegalStateException("the publisher answered '" + answer + "', not " + prefix);
        }
        return answer;
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
        final long eventThreadsCpuStart;
        final long gcCpuStart;
        final long publisherCpuStart;
        final long startNanos = System.nanoTime();
        final Map<String, Double> before;
        final OpenLoopClients load;
        final MetricsScraper metrics;
        final BenchmarkChild proxy;
        final BenchmarkChild publisher;
        Histogram latency;
        Map<String, Double> after;
        Map<String, Double> sampledMax;
        double proxyCores;
        double eventThreadsCores;
        double gcCores;
        double publisherCores;
        String loadAverage;
        String publisherSays = "-";

        Phase(String name, OpenLoopClients load, MetricsScraper metrics, BenchmarkChild proxy, BenchmarkChild publisher)
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
            this.eventThreadsCpuStart = Machine.threadCpuNanos(proxy.process.pid(), EVENT_THREADS);
            this.gcCpuStart = Machine.threadCpuNanos(proxy.process.pid(), GC_THREADS);
            this.publisherCpuStart = Machine.cpuNanos(publisher.process.toHandle());
        }

        void end() throws Exception {
            double wall = System.nanoTime() - startNanos;
            proxyCores = (Machine.cpuNanos(proxy.process.toHandle()) - cpuStart) / wall;
            eventThreadsCores = (Machine.threadCpuNanos(proxy.process.pid(), EVENT_THREADS) - eventThreadsCpuStart)
                    / wall;
            gcCores = (Machine.threadCpuNanos(proxy.process.pid(), GC_THREADS) - gcCpuStart) / wall;
            publisherCores = (Machine.cpuNanos(publisher.process.toHandle()) - publisherCpuStart) / wall;
            latency = load.latency.getIntervalHistogram();
            sampledMax = metrics.stopSampling();
            after = metrics.scrape();
            loadAverage = Machine.loadAverage();
        }

        void print() {
            Histogram h = latency;
            System.out.printf("  %-6s %8d %8.2f %8.2f %8.2f %8.2f  %6.2f %6.2f %6.2f %6.2f  %9s %8s %7s %5s %7s %7s %6s"
                    + "  %s%s%n", name, h.getTotalCount(), ms(h.getValueAtPercentile(50)),
                    ms(h.getValueAtPercentile(99)), ms(h.getValueAtPercentile(99.9)), ms(h.getMaxValue()), proxyCores,
                    eventThreadsCores, gcCores, publisherCores,
                    delta("xpyd_kv_events_total"), delta("xpyd_kv_events_dropped_total"),
                    delta("xpyd_kv_event_messages_dropped_total"), delta("xpyd_kv_event_gaps_total"),
                    delta("xpyd_kv_event_resyncs_total"), maxSampled("xpyd_kv_event_lag_ms"),
                    maxSampled("xpyd_kv_event_queue_messages"), loadAverage,
                    publisherSays.equals("-") ? "" : "; publisher: " + publisherSays);
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
