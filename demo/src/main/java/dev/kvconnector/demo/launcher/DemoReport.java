package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * The demo's numbers, built once from the runs and written three ways: {@link #json()} ({@code demo.json}),
 * {@link #text()} (the terminal) and {@link #html()} ({@code demo.html}, hand-written inline SVG charts).
 * Times are in ms, per-layer transfer latencies in µs, sizes in bytes.
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
     */
    record Run(String name, String flow, boolean layerWise, double wallMs, List<LoadRunner.Result> results,
            List<ObjectNode> instances) {
    }

    private final ObjectNode root;
    private final List<Run> runs;
    private final List<String> mismatches;

    /**
     * @param config the demo's settings, copied into the report as is
     * @param reference the single-instance run every answer is compared with
     * @param runs the XpYd runs
     */
    DemoReport(ObjectNode config, Run reference, List<Run> runs) {
        this.runs = new ArrayList<>();
        this.runs.add(reference);
        this.runs.addAll(runs);
        this.mismatches = compare(reference, runs);
        root = JSON.createObjectNode();
        root.set("config", config);
        ObjectNode machine = root.putObject("machine").put("cpus", Runtime.getRuntime().availableProcessors());
        machine.put("load_average", java.lang.management.ManagementFactory.getOperatingSystemMXBean()
                .getSystemLoadAverage());
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
                    out.add(run.name() + " request " + r.index() + " (" + r.promptBytes() + " prompt tokens): got tokens "
                            + r.tokenIds() + ", the single instance gave " + want.tokenIds());
                }
            }
        }
        return out;
    }

    private static ObjectNode runJson(Run r) {
        ObjectNode o = JSON.createObjectNode().put("name", r.name()).put("flow", r.flow())
                .put("layer_wise", r.layerWise()).put("wall_ms", round(r.wallMs()))
                .put("requests", r.results().size());
        double[] ttft = r.results().stream().mapToDouble(LoadRunner.Result::ttftMs).sorted().toArray();
        double[] total = r.results().stream().mapToDouble(x -> x.endMs() - x.startMs()).sorted().toArray();
        double[] decode = r.results().stream().mapToDouble(x -> x.endMs() - x.firstTokenMs()).sorted().toArray();
        stats(o.putObject("ttft_ms"), ttft);
        stats(o.putObject("total_ms"), total);
        stats(o.putObject("after_first_token_ms"), decode);
        if (!r.instances().isEmpty()) {
            long dRequests = 0;
            long loaded = 0;
            long partial = 0;
            long decodePrefills = 0;
            long inserted = 0;
            long dropped = 0;
            Map<String, Long> misses = new TreeMap<>();
            ObjectNode insert = o.putObject("insert_layer_us");
            ObjectNode drop = o.putObject("drop_layer_us");
            for (ObjectNode m : r.instances()) {
                JsonNode c = m.path("connector");
                JsonNode e = m.path("engine");
                inserted += c.path("inserted_bytes").asLong();
                dropped += c.path("dropped_bytes").asLong();
                if (m.path("name").asText().startsWith("decode")) {
                    dRequests += e.path("requests").asLong();
                    loaded += e.path("loaded_prefills").asLong();
                    partial += e.path("partial_loads").asLong();
                    decodePrefills += e.path("prefill_passes").asLong();
                    e.path("misses").properties().forEach(x -> misses.merge(x.getKey(), x.getValue().asLong(), Long::sum));
                    worst(drop, c.path("drop_layer"));
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
            reqs.addObject().put("index", x.index()).put("prompt_tokens", x.promptBytes())
                    .put("start_ms", round(x.startMs())).put("first_token_ms", round(x.firstTokenMs()))
                    .put("end_ms", round(x.endMs()));
        }
        return o;
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

    private static double round(double v) {
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
        sb.append(String.format(Locale.ROOT, "kvctl demo: %dP%dD, %d requests, max_tokens %d, %d clients, model %s, store %s%n",
                cfg.path("prefill").asInt(), cfg.path("decode").asInt(), cfg.path("requests").asInt(),
                cfg.path("max_tokens").asInt(), cfg.path("clients").asInt(), cfg.path("model").asText(),
                cfg.path("store").asText()));
        sb.append(String.format(Locale.ROOT, "machine: %d cpus, load average %.2f%n%n",
                root.path("machine").path("cpus").asInt(), root.path("machine").path("load_average").asDouble()));
        sb.append(String.format(Locale.ROOT, "%-16s %-11s %9s %9s %9s %9s %8s %12s %12s%n", "run", "flow", "ttft p50",
                "ttft p99", "total p50", "wall s", "hit rate", "insert p50/99", "drop p50/99"));
        for (JsonNode r : root.path("runs")) {
            boolean xpyd = r.has("hit_rate");
            sb.append(String.format(Locale.ROOT, "%-16s %-11s %7.0fms %7.0fms %7.0fms %9.1f %8s %12s %12s%n",
                    r.path("name").asText(), r.path("flow").asText(), r.path("ttft_ms").path("p50").asDouble(),
                    r.path("ttft_ms").path("p99").asDouble(), r.path("total_ms").path("p50").asDouble(),
                    r.path("wall_ms").asDouble() / 1000, xpyd ? pctText(r.path("hit_rate").asDouble()) : "-",
                    xpyd ? us(r.path("insert_layer_us")) : "-", xpyd ? us(r.path("drop_layer_us")) : "-"));
        }
        sb.append('\n');
        for (JsonNode r : root.path("runs")) {
            if (r.has("hit_rate")) {
                sb.append(String.format(Locale.ROOT,
                        "%s: %d of %d decode requests loaded their prefill (%d partial), %d prefills recomputed on D, "
                        + "misses %s; moved %s into the store and %s out%n",
                        r.path("name").asText(), r.path("loaded_prefills").asLong(), r.path("decode_requests").asLong(),
                        r.path("partial_loads").asLong(), r.path("prefill_passes_on_decode").asLong(),
                        r.path("misses").isEmpty() ? "none" : r.path("misses").toString(),
                        bytes(r.path("bytes_inserted").asLong()), bytes(r.path("bytes_dropped").asLong())));
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

    private static String us(JsonNode l) {
        return String.format(Locale.ROOT, "%.0f/%.0fus", l.path("p50").asDouble(), l.path("p99").asDouble());
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
                + "body{font-family:sans-serif;margin:2em;max-width:1000px}pre{background:#f4f4f4;padding:1em}"
                + "h2{margin-top:1.5em}.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}</style></head><body>");
        h.append("<h1>kvctl demo: XpYd disaggregated prefill</h1>");
        h.append(tokensEqual() ? "<p class=\"ok\">Every XpYd answer equals the single instance's, token for token.</p>"
                : "<p class=\"bad\">" + mismatches.size() + " answers differ from the single instance's or failed.</p>");
        h.append("<h2>Where the time goes (mean per request, ms)</h2>");
        List<String> labels = new ArrayList<>();
        List<double[]> stacks = new ArrayList<>();
        for (JsonNode r : root.path("runs")) {
            labels.add(r.path("name").asText());
            stacks.add(new double[] {r.path("ttft_ms").path("mean").asDouble(),
                r.path("after_first_token_ms").path("mean").asDouble()});
        }
        h.append(stacked(labels, stacks, new String[] {"until the first token (queue, prefill or KV load)",
            "decode of the other tokens"}));
        h.append("<h2>Time to first token (ms)</h2>");
        h.append(grouped(labels, root.path("runs"), "ttft_ms", "ms"));
        List<String> xLabels = new ArrayList<>();
        List<JsonNode> xRuns = new ArrayList<>();
        for (JsonNode r : root.path("runs")) {
            if (r.has("hit_rate")) {
                xLabels.add(r.path("name").asText() + " insert");
                xRuns.add(JSON.createObjectNode().set("v", r.path("insert_layer_us")));
                xLabels.add(r.path("name").asText() + " drop");
                xRuns.add(JSON.createObjectNode().set("v", r.path("drop_layer_us")));
            }
        }
        h.append("<h2>Per-layer transfer latency (µs, slowest instance)</h2>");
        h.append(grouped(xLabels, JSON.valueToTree(xRuns), "v", "µs"));
        for (Run r : runs) {
            h.append("<h2>Timeline: ").append(r.name()).append("</h2>").append(timeline(r));
        }
        h.append("<h2>Summary</h2><pre>").append(escape(text())).append("</pre>");
        h.append("<p>Raw numbers: demo.json.</p></body></html>\n");
        return h.toString();
    }

    private static final String[] COLORS = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};

    private static String stacked(List<String> labels, List<double[]> stacks, String[] parts) {
        double max = stacks.stream().mapToDouble(s -> Arrays.stream(s).sum()).max().orElse(1);
        int rowH = 28;
        int left = 150;
        int width = 600;
        StringBuilder s = new StringBuilder();
        int height = labels.size() * rowH + 40;
        s.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">",
                left + width + 120, height));
        for (int i = 0; i < labels.size(); i++) {
            int y = i * rowH + 5;
            s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>", y + 15,
                    escape(labels.get(i))));
            double x = left;
            for (int k = 0; k < stacks.get(i).length; k++) {
                double w = max <= 0 ? 0 : stacks.get(i)[k] / max * width;
                s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"%s\">"
                        + "<title>%s: %.1f ms</title></rect>", x, y, w, COLORS[k], escape(parts[k]), stacks.get(i)[k]));
                x += w;
            }
            s.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\">%.0f ms</text>", x + 5,
                    y + 15, Arrays.stream(stacks.get(i)).sum()));
        }
        legend(s, parts, labels.size() * rowH + 25);
        return s.append("</svg>").toString();
    }

    private static void legend(StringBuilder s, String[] parts, int y) {
        int x = 0;
        for (int k = 0; k < parts.length; k++) {
            s.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                    + "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>", x, y - 10, COLORS[k], x + 16, y,
                    escape(parts[k])));
            x += 16 + parts[k].length() * 7 + 20;
        }
    }

    /** Horizontal p50 and p99 bars per label, from {@code node[i].field.p50/p99}. */
    private static String grouped(List<String> labels, JsonNode nodes, String field, String unit) {
        double max = 1;
        for (JsonNode n : nodes) {
            max = Math.max(max, n.path(field).path("p99").asDouble());
        }
        int left = 200;
        int width = 550;
        int rowH = 44;
        StringBuilder s = new StringBuilder();
        s.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">",
                left + width + 120, labels.size() * rowH + 40));
        for (int i = 0; i < labels.size(); i++) {
            JsonNode v = nodes.get(i).path(field);
            int y = i * rowH + 5;
            s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>", y + 22,
                    escape(labels.get(i))));
            String[] ps = {"p50", "p99"};
            for (int k = 0; k < 2; k++) {
                double val = v.path(ps[k]).asDouble();
                double w = val / max * width;
                s.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>"
                        + "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s %.0f %s</text>", left, y + k * 18, w,
                        COLORS[k], left + w + 4, y + k * 18 + 12, ps[k], val, unit));
            }
        }
        legend(s, new String[] {"p50", "p99"}, labels.size() * rowH + 25);
        return s.append("</svg>").toString();
    }

    /** One line per request: waiting for the first token, then decoding, on the run's own clock. */
    private static String timeline(Run r) {
        double end = r.results().stream().mapToDouble(LoadRunner.Result::endMs).max().orElse(1);
        int width = 800;
        int rowH = Math.max(3, Math.min(12, 400 / Math.max(1, r.results().size())));
        StringBuilder s = new StringBuilder();
        s.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">",
                width + 20, r.results().size() * rowH + 45));
        for (int i = 0; i < r.results().size(); i++) {
            LoadRunner.Result x = r.results().get(i);
            double a = x.startMs() / end * width;
            double b = Math.max(x.firstTokenMs(), x.startMs()) / end * width;
            double c = x.endMs() / end * width;
            int y = i * rowH;
            s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    + "<title>request %d (%d prompt tokens): first token after %.0f ms</title></rect>", a, y,
                    Math.max(0.5, b - a), rowH - 1, COLORS[0], x.index(), x.promptBytes(), x.ttftMs()));
            s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    + "<title>request %d: decode %.0f ms</title></rect>", b, y, Math.max(0.5, c - b), rowH - 1,
                    COLORS[1], x.index(), x.endMs() - x.firstTokenMs()));
        }
        int y = r.results().size() * rowH + 15;
        s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"11\">0 ms</text>"
                + "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.0f ms</text>", y, width, y, end));
        legend(s, new String[] {"until the first token", "decode"}, y + 22);
        return s.append("</svg>").toString();
    }

    private static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
