package dev.kvconnector.demo.launcher;

import static dev.kvconnector.demo.launcher.SvgCharts.escape;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.store.StoreUri;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * The demo's numbers, built once from the runs and written three ways: {@link #json()} ({@code demo.json}),
 * {@link #text()} (the terminal) and {@link #html()} ({@code demo.html}, with {@link SvgCharts}). Times are in ms,
 * per-layer latencies in µs, sizes in bytes. Every sentence comparing runs is worded from the measured numbers,
 * together with the load average and core count they were measured under.
 *
 * <p>Over 400 lines because the three renderings (JSON, text, HTML) share one set of computed comparisons; apart,
 * each would compute its own and they could disagree.
 */
final class DemoReport {
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * One workload run.
     *
     * @param name short label ({@code reference}, {@code xpyd}, {@code xpyd-layerwise})
     * @param flow the proxy flow, or {@code none} for the single instance
     * @param layerWise whether consumers loaded layer by layer
     * @param wallMs the run's duration
     * @param results per request, in prompt order
     * @param instances each engine's {@code GET /kv/metrics} answer after the run, with a {@code name} field added
     * @param loadAverage the machine's 1-minute load average when the run ended ({@link #loadAverage()})
     * @param policy the proxy's policy ({@code round-robin}, {@code kv-aware}), or {@code none} for the single
     *     instance
     * @param store the store the engines shared, secrets masked, or null when the report's config names it
     * @param proxy the proxy's counters after the run ({@link FleetRun#proxyCounters}), or null
     */
    record Run(String name, String flow, boolean layerWise, double wallMs, List<LoadRunner.Result> results,
            List<ObjectNode> instances, double loadAverage, String policy, String store, ObjectNode proxy) {
        /** A run through the proxy's default policy, on the store the config names. */
        Run(String name, String flow, boolean layerWise, double wallMs, List<LoadRunner.Result> results,
                List<ObjectNode> instances, double loadAverage) {
            this(name, flow, layerWise, wallMs, results, instances, loadAverage,
                    "none".equals(flow) ? "none" : "round-robin", null, null);
        }
    }

    /** The machine's 1-minute load average now, or a negative value where the OS does not tell. */
    static double loadAverage() {
        return java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    }

    private final ObjectNode root;
    private final List<Run> runs;
    private final List<String> mismatches;

    /**
     * @param config the demo's settings, copied into the report as is
     * @param loadAtStart the 1-minute load average before the first run ({@link #loadAverage()})
     * @param reference the single-instance run every answer is compared with
     * @param runs the XpYd runs
     */
    DemoReport(ObjectNode config, double loadAtStart, Run reference, List<Run> runs) {
        this.runs = new ArrayList<>();
        this.runs.add(reference);
        this.runs.addAll(runs);
        this.mismatches = compare(reference, runs);
        root = JSON.createObjectNode();
        root.set("config", config);
        root.putObject("machine").put("cpus", Runtime.getRuntime().availableProcessors())
                .put("load_average_1m_start", round(loadAtStart)).put("load_average_1m_end", round(loadAverage()));
        root.put("tokens_equal", mismatches.isEmpty());
        ArrayNode mm = root.putArray("mismatches");
        mismatches.forEach(mm::add);
        ArrayNode rs = root.putArray("runs");
        for (Run r : this.runs) {
            rs.add(runJson(r));
        }
    }

    /** True when every answer of every XpYd run equals the single instance's, token for token, and none failed. */
    boolean tokensEqual() {
        return mismatches.isEmpty();
    }

    /** Mismatched or failed requests, one line each. */
    List<String> mismatches() {
        return mismatches;
    }

    private static List<String> compare(Run reference, List<Run> runs) {
        List<String> out = new ArrayList<>();
        for (LoadRunner.Result r : reference.results()) {
            if (r.error() != null) {
                out.add(reference.name() + " request " + r.index() + " failed: " + r.error());
            }
        }
        for (Run run : runs) {
            for (LoadRunner.Result r : run.results()) {
                LoadRunner.Result want = reference.results().get(r.index());
                if (r.error() != null) {
                    out.add(run.name() + " request " + r.index() + " failed: " + r.error());
                } else if (r.tokenIds().isEmpty() || !r.tokenIds().equals(want.tokenIds())
                        || !r.text().equals(want.text())) {
                    out.add(run.name() + " request " + r.index() + " (" + r.promptTokens() + " prompt tokens): got tokens "
                            + r.tokenIds() + ", the single instance gave " + want.tokenIds());
                }
            }
        }
        return out;
    }

    private static ObjectNode runJson(Run r) {
        ObjectNode o = JSON.createObjectNode().put("name", r.name()).put("flow", r.flow()).put("policy", r.policy())
                .put("layer_wise", r.layerWise()).put("wall_ms", round(r.wallMs()))
                .put("requests", r.results().size()).put("load_average_1m_end", round(r.loadAverage()));
        double[] ttft = r.results().stream().mapToDouble(LoadRunner.Result::ttftMs).sorted().toArray();
        double[] total = r.results().stream().mapToDouble(x -> x.endMs() - x.startMs()).sorted().toArray();
        double[] decode = r.results().stream().mapToDouble(x -> x.endMs() - x.firstTokenMs()).sorted().toArray();
        stats(o.putObject("ttft_ms"), ttft);
        stats(o.putObject("total_ms"), total);
        stats(o.putObject("after_first_token_ms"), decode);
        if (r.store() != null) {
            o.put("store", StoreUri.parse(r.store()).masked());
        }
        Comparison.counters(o, r);
        // The reference engine's own counters say nothing of a transfer; a fleet's (with or without a proxy) do.
        if (!"single".equals(r.name()) && !r.instances().isEmpty()) {
            long dRequests = 0;
            long loaded = 0;
            long partial = 0;
            long decodePrefills = 0;
            long inserted = 0;
            long dropped = 0;
            Map<String, Long> misses = new TreeMap<>();
            ObjectNode insert = o.putObject("insert_layer_us");
            ObjectNode drop = o.putObject("drop_layer_us");
            ObjectNode dropWait = o.putObject("drop_wait_us");
            for (ObjectNode m : r.instances()) {
                JsonNode c = m.path("connector");
                JsonNode e = m.path("engine");
                inserted += c.path("inserted_bytes").asLong();
                dropped += c.path("dropped_bytes").asLong();
                perTransport(o, m);
                if (m.path("name").asText().startsWith("decode")) {
                    dRequests += e.path("requests").asLong();
                    loaded += e.path("loaded_prefills").asLong();
                    partial += e.path("partial_loads").asLong();
                    decodePrefills += e.path("prefill_passes").asLong();
                    e.path("misses").properties().forEach(x -> misses.merge(x.getKey(), x.getValue().asLong(), Long::sum));
                    worst(drop, c.path("drop_layer"));
                    worst(dropWait, c.path("drop_wait"));
                } else {
                    worst(insert, c.path("insert_layer"));
                }
            }
            o.put("decode_requests", dRequests).put("loaded_prefills", loaded).put("partial_loads", partial)
                    .put("hit_rate", dRequests == 0 ? 0 : round((double) loaded / dRequests))
                    .put("prefill_passes_on_decode", decodePrefills)
                    .put("bytes_inserted", inserted).put("bytes_dropped", dropped);
            ObjectNode mo = o.putObject("misses");
            misses.forEach((k, v) -> {
                if (v > 0) {
                    mo.put(k, v);
                }
            });
            ArrayNode inst = o.putArray("instances");
            r.instances().forEach(inst::add);
        }
        ArrayNode reqs = o.putArray("per_request");
        for (LoadRunner.Result x : r.results()) {
            reqs.addObject().put("index", x.index()).put("prompt_tokens", x.promptTokens())
                    .put("start_ms", round(x.startMs())).put("first_token_ms", round(x.firstTokenMs()))
                    .put("end_ms", round(x.endMs()));
        }
        return o;
    }

    /**
     * Adds a peer-to-peer instance's counters per transport ({@code p2p}, {@code store}) to the run's
     * {@code transports}: bytes summed, P's insert and D's copy and wait latency as in {@link #worst}.
     */
    private static void perTransport(ObjectNode run, ObjectNode instance) {
        boolean decode = instance.path("name").asText().startsWith("decode");
        for (Map.Entry<String, JsonNode> t : instance.path("connector").path("transports").properties()) {
            ObjectNode into = run.with("transports").with(t.getKey());
            JsonNode c = t.getValue();
            into.put("bytes_inserted", into.path("bytes_inserted").asLong() + c.path("inserted_bytes").asLong())
                    .put("bytes_dropped", into.path("bytes_dropped").asLong() + c.path("dropped_bytes").asLong());
            if (decode) {
                worst(into.with("drop_layer_us"), c.path("drop_layer"));
                worst(into.with("drop_wait_us"), c.path("drop_wait"));
            } else {
                worst(into.with("insert_layer_us"), c.path("insert_layer"));
            }
        }
    }

    /** The slowest instance's p50 and p99 (instances are not merged: their histograms are not exported). */
    private static void worst(ObjectNode into, JsonNode l) {
        into.put("count", into.path("count").asLong() + l.path("count").asLong());
        into.put("p50", round(Math.max(into.path("p50").asDouble(), l.path("p50_us").asDouble())));
        into.put("p99", round(Math.max(into.path("p99").asDouble(), l.path("p99_us").asDouble())));
    }

    private static void stats(ObjectNode o, double[] sorted) {
        o.put("p50", round(pct(sorted, 50))).put("p99", round(pct(sorted, 99)))
                .put("mean", round(Arrays.stream(sorted).average().orElse(0)));
    }

    /** Nearest-rank percentile of sorted values; 0 for none. */
    static double pct(double[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.clamp(rank - 1, 0, sorted.length - 1)];
    }

    static double round(double v) {
        return Math.round(v * 100) / 100.0;
    }

    /** The report as {@code demo.json}. */
    ObjectNode json() {
        return root;
    }

    /** The report for the terminal. */
    String text() {
        StringBuilder sb = new StringBuilder();
        JsonNode cfg = root.path("config");
        sb.append(String.format(Locale.ROOT, "kvctl demo: %dP%dD, %d requests, max_tokens %d, %d clients, model %s, store %s, "
                + "keys %s, transport %s%n", cfg.path("prefill").asInt(), cfg.path("decode").asInt(), cfg.path("requests").asInt(),
                cfg.path("max_tokens").asInt(), cfg.path("clients").asInt(), cfg.path("model").asText(),
                cfg.path("store").asText(), cfg.path("scheme").asText("kvc-v1"), cfg.path("transport").asText("store")));
        sb.append(String.format(Locale.ROOT, "machine: %d cores, load average (1 min) %.2f before the runs, %.2f after"
                + "%n%n", cpus(), root.path("machine").path("load_average_1m_start").asDouble(),
                root.path("machine").path("load_average_1m_end").asDouble()));
        int width = 16;
        for (JsonNode r : root.path("runs")) {
            width = Math.max(width, r.path("name").asText().length());
        }
        String name = "%-" + width + "s";
        sb.append(String.format(Locale.ROOT, name + " %-11s %9s %9s %9s %9s %6s %8s %14s %14s %16s%n", "run", "flow",
                "ttft p50", "ttft p99", "total p50", "wall s", "load", "hit rate", "insert p50/99", "copy p50/99",
                "wait-for-P p50/99"));
        for (JsonNode r : root.path("runs")) {
            boolean xpyd = r.has("hit_rate");
            boolean waited = r.path("drop_wait_us").path("count").asLong() > 0;
            sb.append(String.format(Locale.ROOT, name + " %-11s %7.0fms %7.0fms %7.0fms %9.1f %6.2f %8s %14s %14s %16s%n",
                    r.path("name").asText(), r.path("flow").asText(), r.path("ttft_ms").path("p50").asDouble(),
                    r.path("ttft_ms").path("p99").asDouble(), r.path("total_ms").path("p50").asDouble(),
                    r.path("wall_ms").asDouble() / 1000, r.path("load_average_1m_end").asDouble(),
                    xpyd ? pctText(r.path("hit_rate").asDouble()) : "-", xpyd ? us(r.path("insert_layer_us")) : "-",
                    xpyd ? us(r.path("drop_layer_us")) : "-", waited ? us(r.path("drop_wait_us")) : "-"));
        }
        sb.append('\n');
        sb.append(Comparison.table(root));
        for (String f : findings()) {
            sb.append(f).append('\n');
        }
        sb.append(conditions()).append('\n');
        sb.append('\n');
        for (JsonNode r : root.path("runs")) {
            if (r.has("hit_rate")) {
                sb.append(String.format(Locale.ROOT,
                        "%s: %d of %d decode requests loaded their prefill (%d partial), %d prefills recomputed on D, "
                        + "misses %s; moved %s%n",
                        r.path("name").asText(), r.path("loaded_prefills").asLong(), r.path("decode_requests").asLong(),
                        r.path("partial_loads").asLong(), r.path("prefill_passes_on_decode").asLong(),
                        r.path("misses").isEmpty() ? "none" : r.path("misses").toString(),
                        moved(cfg, r)));
                for (Map.Entry<String, JsonNode> t : r.path("transports").properties()) {
                    JsonNode v = t.getValue();
                    sb.append(String.format(Locale.ROOT, "  %s: %s written by P, %s read by D; P's insert p50/99 %s,"
                            + " D's copy p50/99 %s, D's wait p50/99 %s%n", t.getKey(),
                            bytes(v.path("bytes_inserted").asLong()), bytes(v.path("bytes_dropped").asLong()),
                            us(v.path("insert_layer_us")), us(v.path("drop_layer_us")), us(v.path("drop_wait_us"))));
                }
            }
        }
        sb.append(tokensEqual() ? "\ntokens: every XpYd answer equals the single instance's, token for token\n"
                : "\nTOKENS DIFFER: " + mismatches.size() + " answers differ from the single instance's or failed:\n  "
                + String.join("\n  ", mismatches.subList(0, Math.min(10, mismatches.size()))) + "\n");
        return sb.toString();
    }

    private static String pctText(double v) {
        return String.format(Locale.ROOT, "%.0f%%", v * 100);
    }

    /** A latency's p50/p99 in µs, or "-" where none was measured. */
    private static String us(JsonNode l) {
        if (l.path("count").asLong() == 0) {
            return "-";
        }
        return SvgCharts.micros(l.path("p50").asDouble()).replace("µs", "us") + "/"
                + SvgCharts.micros(l.path("p99").asDouble()).replace("µs", "us");
    }

    private int cpus() {
        return root.path("machine").path("cpus").asInt();
    }

    /** One sentence per XpYd run comparing it with the single engine ({@link ReportWording#findings}). */
    List<String> findings() {
        List<String> out = new ArrayList<>(ReportWording.findings(root));
        out.addAll(Comparison.findings(root));
        return out;
    }

    /** What the numbers were measured under ({@link ReportWording#conditions}). */
    String conditions() {
        return ReportWording.conditions(root);
    }

    /** The run's bytes moved, worded for the transport: through the store, from P's memory into D's, or both. */
    private static String moved(JsonNode cfg, JsonNode run) {
        String in = bytes(run.path("bytes_inserted").asLong());
        String out = bytes(run.path("bytes_dropped").asLong());
        return switch (cfg.path("transport").asText()) {
            case "p2p" -> in + " written by P and " + out + " accepted by D, peer to peer ("
                    + cfg.path("p2p_engine").asText() + ")";
            case "p2p+store" -> in + " written by P and " + out + " read by D over both transports, peer to peer ("
                    + cfg.path("p2p_engine").asText() + ") and the store, per transport:";
            default -> in + " into the store and " + out + " out";
        };
    }

    static String bytes(long b) {
        if (b >= 1L << 20) {
            return String.format(Locale.ROOT, "%.1f MiB", b / 1048576.0);
        }
        return String.format(Locale.ROOT, "%.1f KiB", b / 1024.0);
    }

    /** The report as a self-contained HTML page with inline SVG charts. */
    String html() {
        StringBuilder h = new StringBuilder();
        h.append("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>kvctl demo</title><style>"
                + "body{font-family:sans-serif;margin:2em;max-width:1000px}pre{background:#f4f4f4;padding:1em;overflow-x:auto}"
                + "h2{margin-top:1.5em}.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}"
                + ".note{color:#444}</style></head><body>");
        h.append("<h1>kvctl demo: XpYd disaggregated prefill</h1>");
        h.append(tokensEqual() ? "<p class=\"ok\">Every XpYd answer equals the single instance's, token for token.</p>"
                : "<p class=\"bad\">" + mismatches.size() + " answers differ from the single instance's or failed.</p>");
        h.append("<h2>What this run measured</h2><ul>");
        for (String f : findings()) {
            h.append("<li>").append(escape(f)).append("</li>");
        }
        h.append("</ul><p class=\"note\">").append(escape(conditions())).append("</p>");
        h.append(Comparison.html(root));
        h.append("<h2>Where the time goes (mean per request, ms)</h2>");
        List<String> labels = new ArrayList<>();
        List<double[]> stacks = new ArrayList<>();
        List<SvgCharts.Bar> ttft = new ArrayList<>();
        double ttftMax = 0;
        for (JsonNode r : root.path("runs")) {
            labels.add(r.path("name").asText());
            stacks.add(new double[] {r.path("ttft_ms").path("mean").asDouble(),
                r.path("after_first_token_ms").path("mean").asDouble()});
            ttft.add(new SvgCharts.Bar(r.path("name").asText(), r.path("ttft_ms").path("p50").asDouble(),
                    r.path("ttft_ms").path("p99").asDouble()));
            ttftMax = Math.max(ttftMax, r.path("ttft_ms").path("p99").asDouble());
        }
        h.append(SvgCharts.stacked(labels, stacks, new String[] {"until the first token (queue, prefill or KV load)",
            "decode of the other tokens"}));
        h.append("<h2>Time to first token (ms)</h2>");
        h.append(SvgCharts.bars(ttft, SvgCharts.linear(ttftMax, 550, v -> SvgCharts.number(v) + " ms"), 550,
                v -> SvgCharts.number(Math.rint(v)) + " ms"));
        h.append("<h2>Per-layer latency (log scale; the slowest instance's p50 and p99)</h2>");
        h.append("<p class=\"note\">insert: P puts one layer into the store. copy: D reads, checks and scatters one"
                + " layer. waiting for P: in a layer-wise run D starts before P has stored a layer and polls for it;"
                + " that wait comes before the copy and is counted apart from it."
                + (root.path("config").path("transport").asText().startsWith("p2p") ? " Peer to peer (p2p):"
                + " insert is P gathering one layer and submitting its WRITEs into D's blocks; copy is D checking the"
                + " layer's word sum in its blocks; waiting for P is D's wait for the layer to land. With p2p+store"
                + " each transport has its own bars: P inserts into both, D reads the request in flight from P and,"
                + " with no P (store-reuse), from the store." : "") + "</p>");
        h.append(layerChart());
        double end = 1;
        for (Run r : runs) {
            end = Math.max(end, r.results().stream().mapToDouble(LoadRunner.Result::endMs).max().orElse(1));
        }
        h.append(String.format(Locale.ROOT, "<h2>Timelines (one scale for every run; the longest ends at %s s)</h2>",
                SvgCharts.number(Math.rint(end) / 1000)));
        for (Run r : runs) {
            List<SvgCharts.Span> spans = r.results().stream().map(x -> new SvgCharts.Span(x.index(), x.promptTokens(),
                    x.startMs(), x.firstTokenMs(), x.endMs())).toList();
            h.append("<h3>").append(escape(r.name())).append(" (").append(SvgCharts.micros(r.wallMs() * 1000))
                    .append(")</h3>").append(SvgCharts.timeline(spans, end));
        }
        h.append("<h2>Summary</h2><pre>").append(escape(text())).append("</pre>");
        h.append("<p>Raw numbers: demo.json.</p></body></html>\n");
        return h.toString();
    }

    /** P's insert, D's copy and D's wait per XpYd run, p50 and p99 on one log axis in µs. */
    private String layerChart() {
        List<SvgCharts.Bar> bars = new ArrayList<>();
        for (JsonNode r : root.path("runs")) {
            if (!r.has("hit_rate")) {
                continue;
            }
            String name = r.path("name").asText();
            if (r.has("transports")) {
                for (Map.Entry<String, JsonNode> t : r.path("transports").properties()) {
                    layerBars(bars, name + " " + t.getKey(), t.getValue(), true);
                }
            } else {
                layerBars(bars, name, r, false);
            }
        }
        double min = Double.MAX_VALUE;
        double max = 1;
        for (SvgCharts.Bar b : bars) {
            for (double v : new double[] {b.p50(), b.p99()}) {
                if (v > 0) {
                    min = Math.min(min, v);
                }
                max = Math.max(max, v);
            }
        }
        // Below 1 µs is "no wait at all" (a layer already there counts 1 ns): it sits at the axis's start.
        SvgCharts.Axis axis = SvgCharts.log(Math.max(1, min == Double.MAX_VALUE ? 1 : min), max, 550,
                SvgCharts::micros);
        return SvgCharts.bars(bars, axis, 550, SvgCharts::micros);
    }

    /**
     * P's insert, D's copy and (when D waited) D's wait of one run or transport; with {@code skipEmpty}, a part that
     * moved no layer (a run with no P, a transport D did not read) is left out.
     */
    private static void layerBars(List<SvgCharts.Bar> bars, String name, JsonNode r, boolean skipEmpty) {
        if (!skipEmpty || r.path("insert_layer_us").path("count").asLong() > 0) {
            bars.add(bar(name + ": insert (P)", r.path("insert_layer_us")));
        }
        if (!skipEmpty || r.path("drop_layer_us").path("count").asLong() > 0) {
            bars.add(bar(name + ": copy (D)", r.path("drop_layer_us")));
        }
        if (r.path("drop_wait_us").path("count").asLong() > 0) {
            bars.add(bar(name + ": waiting for P (D)", r.path("drop_wait_us")));
        }
    }

    private static SvgCharts.Bar bar(String label, JsonNode l) {
        return new SvgCharts.Bar(label, l.path("p50").asDouble(), l.path("p99").asDouble());
    }

}
