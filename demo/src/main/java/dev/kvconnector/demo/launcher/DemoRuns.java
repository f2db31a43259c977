package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.demo.EngineCommand;
import dev.kvconnector.proxy.KvEventEndpoint;
import dev.kvconnector.proxy.Policy;
import dev.kvconnector.proxy.ProxyConfig;
import dev.kvconnector.proxy.ProxyFlow;
import dev.kvconnector.proxy.XpydProxy;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine;

/**
 * The demo's runs: the single reference engine in-process ({@link #single}), and an XpYd run ({@link #xpyd}): X
 * prefill and Y decode engines as child JVMs ({@link EngineFleet}), the XpYd proxy in-process in front of them, a
 * workload through it, then every engine's {@code /kv/metrics} answer and the proxy's counters.
 */
final class DemoRuns {
    /** The model name the engines serve and the clients ask for. */
    static final String MODEL = "kvc-demo";

    /** Sends a workload to the server at {@code base}; {@code label} heads its progress bar. */
    @FunctionalInterface
    interface Load {
        List<LoadRunner.Result> run(String label, URI base) throws InterruptedException;
    }

    /**
     * What to run.
     *
     * @param name        the run's label in the report
     * @param flow        the proxy's flow
     * @param policy      the proxy's policy; under {@link Policy#KV_AWARE} the proxy subscribes to the KV events of
     *                    every engine that publishes them ({@code --kv-events} among the engines' flags)
     * @param kvDecodeMaxSuffix the proxy's {@link ProxyConfig#kvDecodeMaxSuffix()}, in tokens (kv-aware only)
     * @param layerWise   consumers load layer by layer
     * @param prefill     producer engines
     * @param decode      consumer engines
     * @param store       the store URI the engines share
     * @param scheme      the key scheme
     * @param tiny        the 2-layer test model
     * @param prefillArgs flags added to every producer's command line
     * @param decodeArgs  flags added to every consumer's command line
     * @param logDir      where the engines' logs go
     * @param startTimeout how long an engine may take to answer {@code /health}
     */
    record Spec(String name, ProxyFlow flow, Policy policy, int kvDecodeMaxSuffix, boolean layerWise, int prefill, int decode, String store,
                String scheme, boolean tiny, List<String> prefillArgs, List<String> decodeArgs, Path logDir,
                Duration startTimeout) {
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private DemoRuns() {
    }

    /**
     * Runs {@code load} on one in-process engine with role none (with {@code engineArgs} added to its flags), the
     * reference every XpYd answer is compared with.
     */
    static DemoReport.Run single(boolean tiny, List<String> engineArgs, Load load, DemoCleanup cleanup)
            throws Exception {
        EngineCommand cmd = new EngineCommand();
        List<String> args = new ArrayList<>(List.of("--host", "127.0.0.1", "--port", "0", "--role", "none",
                "--model-name", MODEL));
        if (tiny) {
            args.add("--tiny");
        }
        args.addAll(engineArgs);
        new CommandLine(cmd).parseArgs(args.toArray(String[]::new));
        try (EngineCommand.Running single = cmd.start()) {
            cleanup.reference = single;
            long t0 = System.nanoTime();
            List<LoadRunner.Result> results = load.run("reference (1 engine)", single.server().baseUri());
            double wall = (System.nanoTime() - t0) / 1e6;
            ObjectNode metrics = EngineFleet.kvMetrics(single.server().baseUri()).put("name", "single");
            return new DemoReport.Run("single", "none", false, wall, results, List.of(metrics),
                    DemoReport.loadAverage(), "none", null, null);
        } finally {
            cleanup.reference = null;
        }
    }

    /** Starts the engines and the proxy, runs {@code load} through it, and stops them, with {@code cleanup} on watch. */
    static DemoReport.Run xpyd(Spec spec, Load load, DemoCleanup cleanup) throws Exception {
        try (EngineFleet fleet = EngineFleet.start(spec.prefill(), spec.decode(), spec.store(), spec.scheme(),
                spec.tiny(), spec.layerWise(), spec.prefillArgs(), spec.decodeArgs(), spec.logDir(),
                spec.startTimeout())) {
            cleanup.fleet = fleet;
            ProxyConfig.Builder pc = ProxyConfig.builder(MODEL).bindHost("127.0.0.1").port(0).flow(spec.flow())
                    .policy(spec.policy()).kvDecodeMaxSuffix(spec.kvDecodeMaxSuffix())
                    // Engines busy computing on a small machine answer /health late; that is not a failure.
                    .healthTimeout(Duration.ofSeconds(10));
            for (EngineFleet.Member m : fleet.members()) {
                String instance = m.uri().getHost() + ":" + m.uri().getPort();
                if (m.name().startsWith("prefill")) {
                    pc.prefill(instance);
                } else {
                    pc.decode(instance);
                }
                if (spec.policy() == Policy.KV_AWARE && m.events() != null) {
                    pc.kvEvents(KvEventEndpoint.parse(instance + "=" + m.events()));
                }
            }
            String flow = spec.flow().name().toLowerCase(Locale.ROOT);
            long t0;
            List<LoadRunner.Result> results;
            ObjectNode proxyCounters;
            try (XpydProxy proxy = new XpydProxy(pc.build()).start()) {
                cleanup.proxy = proxy;
                t0 = System.nanoTime();
                results = load.run(spec.name() + " (" + flow + ")", proxy.uri());
                proxyCounters = proxyCounters(proxy.uri());
            } finally {
                cleanup.proxy = null;
            }
            double wall = (System.nanoTime() - t0) / 1e6;
            return new DemoReport.Run(spec.name(), flow, spec.layerWise(), wall, results, fleet.kvMetrics(),
                    DemoReport.loadAverage(), policyName(spec.policy()), spec.store(), proxyCounters);
        } finally {
            cleanup.fleet = null;
        }
    }

    /** {@code round-robin}, {@code kv-aware}, ...: the policy as {@code kvctl proxy --policy} spells it. */
    static String policyName(Policy p) {
        return p.name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    /**
     * The proxy's routing counters from its {@code GET /metrics}: {@code decode_only} (requests the kv-aware policy
     * sent to D alone), and under kv-aware {@code kv_decisions} by reason and {@code kv_predictions} by outcome.
     */
    static ObjectNode proxyCounters(URI proxy) throws IOException, InterruptedException {
        String text;
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(proxy.resolve("/metrics"))
                    .timeout(Duration.ofSeconds(10)).GET().build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IOException("GET " + proxy.resolve("/metrics") + " answered " + r.statusCode());
            }
            text = r.body();
        }
        ObjectNode out = JSON.createObjectNode();
        ObjectNode decisions = JSON.createObjectNode();
        ObjectNode predictions = JSON.createObjectNode();
        for (String line : text.split("\n")) {
            if (line.startsWith("xpyd_proxy_kv_decode_only_total ")) {
                out.put("decode_only", value(line));
            } else if (line.startsWith("xpyd_kv_route_decisions_total{reason=\"")) {
                decisions.put(label(line), value(line));
            } else if (line.startsWith("xpyd_kv_predictions_total{outcome=\"")) {
                predictions.put(label(line), value(line));
            }
        }
        if (!decisions.isEmpty()) {
            out.set("kv_decisions", decisions);
            out.set("kv_predictions", predictions);
        }
        return out;
    }

    private static String label(String line) {
        int q = line.indexOf('"');
        return line.substring(q + 1, line.indexOf('"', q + 1));
    }

    private static long value(String line) {
        return Long.parseLong(line.substring(line.lastIndexOf(' ') + 1).trim());
    }
}
