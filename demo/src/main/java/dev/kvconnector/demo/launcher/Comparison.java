package dev.kvconnector.demo.launcher;

import static dev.kvconnector.demo.launcher.SvgCharts.escape;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The report's policies and stores side by side (the multi-turn workload): per run the prompt tokens recomputed,
 * the prefix hit rate, time to first token, the decode-only requests and the bytes read over the network, in
 * {@code demo.json} ({@link #counters}), on the terminal ({@link #table}), in {@code demo.html} ({@link #html}), and
 * in sentences worded from those numbers ({@link #findings}).
 *
 * <p>Definitions, in every run of every workload:
 * <ul>
 *   <li>{@code prompt_tokens}: the prompt tokens of the requests sent;</li>
 *   <li>{@code prompt_tokens_recomputed}: prompt tokens some engine computed (its {@code engine.prefill_tokens}),
 *       P and D together: a D that loads a prompt without its hidden states computes its last token;</li>
 *   <li>{@code prefix_hit_rate}: the share of prompt tokens no engine computed, reused from a prefix cache or
 *       loaded from the store ({@code 1 - prompt_tokens_recomputed / prompt_tokens}; for the single engine, its
 *       own). A decode-only D computes the suffix the store lacked, so the prefill side alone would overstate it;</li>
 *   <li>{@code decode_only}: requests the kv-aware proxy sent to D alone because the store held their whole prompt,
 *       or all but a suffix of at most {@code --kv-decode-max-suffix} tokens; {@code decode_only_suffix}: those of
 *       the second kind, where D computed the suffix ({@code kv_decisions.store_prefix});</li>
 *   <li>{@code decode_saved_chunks}: chunks the decode engines saved that the store did not hold yet, prompt and
 *       answer ({@code --save-decode-kv}; {@code engine.decode_save.new_chunks}, summed);</li>
 *   <li>{@code store_tiers}: a {@code tiered:} store's counters per tier, summed over the engines, and
 *       {@code network_bytes_read} / {@code network_bytes_written}: those of its tiers that are not in this host's
 *       memory (any but {@code shm:} and {@code memory:}).</li>
 * </ul>
 */
final class Comparison {
    private Comparison() {
    }

    /** Adds the definitions above to {@code o}, the JSON of {@code r}. */
    static void counters(ObjectNode o, DemoReport.Run r) {
        long prompt = r.results().stream().mapToLong(LoadRunner.Result::promptTokens).sum();
        long recomputed = 0;
        long cacheHits = 0;
        long decodeSaved = 0;
        List<ObjectNode> tiers = new ArrayList<>();
        ObjectNode writeBack = null;
        for (ObjectNode m : r.instances()) {
            recomputed += m.path("engine").path("prefill_tokens").asLong();
            cacheHits += m.path("engine").path("prefix_cache").path("hit_tokens").asLong();
            decodeSaved += m.path("engine").path("decode_save").path("new_chunks").asLong();
            JsonNode ts = m.path("store").path("tiers");
            for (int i = 0; i < ts.size(); i++) {
                if (tiers.size() <= i) {
                    tiers.add(o.objectNode().put("uri", ts.get(i).path("uri").asText()));
                }
                for (String f : List.of("hits", "errors", "promotions", "bytes_read", "bytes_written")) {
                    tiers.get(i).put(f, tiers.get(i).path(f).asLong() + ts.get(i).path(f).asLong());
                }
            }
            JsonNode wb = m.path("store").path("write_back");
            if (!wb.isMissingNode()) {
                writeBack = writeBack == null ? o.objectNode() : writeBack;
                for (String f : List.of("depth", "written", "dropped", "failed", "refused")) {
                    writeBack.put(f, writeBack.path(f).asLong() + wb.path(f).asLong());
                }
            }
        }
        o.put("prompt_tokens", prompt);
        if (r.instances().isEmpty()) {
            return;
        }
        o.put("prompt_tokens_recomputed", recomputed).put("prefix_cache_hit_tokens", cacheHits)
                .put("prefix_hit_rate", prompt == 0 ? 0 : DemoReport.round(1 - (double) recomputed / prompt))
                .put("decode_saved_chunks", decodeSaved);
        if (r.proxy() != null) {
            o.put("decode_only", r.proxy().path("decode_only").asLong());
            if (r.proxy().has("kv_decisions")) {
                o.put("decode_only_suffix", r.proxy().path("kv_decisions").path("store_prefix").asLong());
                o.set("kv_decisions", r.proxy().get("kv_decisions"));
                o.set("kv_predictions", r.proxy().get("kv_predictions"));
            }
        }
        if (!tiers.isEmpty()) {
            ArrayNode ta = o.putArray("store_tiers");
            long read = 0;
            long written = 0;
            for (ObjectNode t : tiers) {
                ta.add(t);
                if (remote(t.path("uri").asText())) {
                    read += t.path("bytes_read").asLong();
                    written += t.path("bytes_written").asLong();
                }
            }
            o.put("network_bytes_read", read).put("network_bytes_written", written);
            o.set("write_back", writeBack);
        }
    }

    /** Whether a tier is reached over the network: anything but this host's {@code shm:} and {@code memory:}. */
    static boolean remote(String tierUri) {
        return !tierUri.startsWith("shm:") && !tierUri.startsWith("memory:");
    }

    private static boolean compared(JsonNode root) {
        return "multi-turn".equals(root.path("config").path("workload").asText());
    }

    /** The side-by-side table for the terminal, or "" outside the multi-turn workload. */
    static String table(JsonNode root) {
        if (!compared(root)) {
            return "";
        }
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-26s %-12s %8s %10s %10s %9s %9s %11s %7s"
                + " %8s %13s%n", "run", "policy", "prompt", "recomputed", "prefix hit", "ttft p50", "ttft p99",
                "decode-only", "+suffix", "D loads", "network read"));
        for (JsonNode r : root.path("runs")) {
            sb.append(String.format(Locale.ROOT, "%-26s %-12s %8d %10d %10s %7.0fms %7.0fms %11s %7s %8s %13s%n",
                    r.path("name").asText(), r.path("policy").asText(), r.path("prompt_tokens").asLong(),
                    r.path("prompt_tokens_recomputed").asLong(), percent(r.path("prefix_hit_rate").asDouble()),
                    r.path("ttft_ms").path("p50").asDouble(), r.path("ttft_ms").path("p99").asDouble(),
                    r.has("decode_only") ? Long.toString(r.path("decode_only").asLong()) : "-",
                    r.has("decode_only_suffix") ? Long.toString(r.path("decode_only_suffix").asLong()) : "-",
                    r.has("hit_rate") ? percent(r.path("hit_rate").asDouble()) : "-",
                    r.has("network_bytes_read") ? DemoReport.bytes(r.path("network_bytes_read").asLong()) : "-"));
        }
        return sb.append('\n').toString();
    }

    private static String percent(double v) {
        return String.format(Locale.ROOT, "%.0f%%", v * 100);
    }

    /**
     * Sentences worded from the numbers: kv-aware against round-robin on the same store (prompt tokens recomputed,
     * against the goal of at least 50% fewer, and time to first token), and a tiered store against its last
     * tier alone (bytes read over the network, D's hit rate, time to first token).
     */
    static List<String> findings(JsonNode root) {
        List<String> out = new ArrayList<>();
        if (!compared(root)) {
            return out;
        }
        JsonNode rr = run(root, "round-robin");
        JsonNode kv = run(root, "kv-aware");
        if (rr != null && kv != null) {
            long a = rr.path("prompt_tokens_recomputed").asLong();
            long b = kv.path("prompt_tokens_recomputed").asLong();
            double fewer = a == 0 ? 0 : (a - b) * 100.0 / a;
            JsonNode single = run(root, "single");
            String floor = single == null || !single.has("prompt_tokens_recomputed") || a == 0 ? ""
                    : String.format(Locale.ROOT, "; the single engine, whose own prefix cache holds every earlier turn,"
                    + " recomputed %d, so no routing could recompute more than %.0f%% fewer",
                    single.path("prompt_tokens_recomputed").asLong(),
                    (a - single.path("prompt_tokens_recomputed").asLong()) * 100.0 / a);
            out.add(String.format(Locale.ROOT, "kv-aware recomputed %d prompt tokens against %d under round-robin: "
                    + "%s (the goal is at least 50%% fewer: %s%s); its prefix hit rate was %s against %s, with %d "
                    + "decode-only requests (%d of them computing on D a suffix of at most %d tokens that the store "
                    + "lacked); time to first token p50 %s against %s, %s; p99 %s against %s (%s).", b, a,
                    fewer >= 0 ? String.format(Locale.ROOT, "%.0f%% fewer", fewer)
                    : String.format(Locale.ROOT, "%.0f%% more", -fewer), fewer >= 50 ? "met" : "not met", floor,
                    percent(kv.path("prefix_hit_rate").asDouble()), percent(rr.path("prefix_hit_rate").asDouble()),
                    kv.path("decode_only").asLong(), kv.path("decode_only_suffix").asLong(),
                    root.path("config").path("kv_decode_max_suffix").asLong(), ms(kv, "p50"), ms(rr, "p50"),
                    ReportWording.relative(kv.path("ttft_ms").path("p50").asDouble(),
                            rr.path("ttft_ms").path("p50").asDouble()), ms(kv, "p99"), ms(rr, "p99"),
                    measured(root, kv, rr)));
        }
        JsonNode alone = run(root, "kv-aware, last tier alone");
        if (kv != null && alone != null) {
            out.add(String.format(Locale.ROOT, "%s read %s over the network (written: %s) against %s (written: %s) "
                    + "on %s alone; D loaded its whole prompt in %s of requests against %s; time to first token p50 %s "
                    + "against %s, %s (both under kv-aware, %s).", kv.path("store").asText(),
                    DemoReport.bytes(kv.path("network_bytes_read").asLong()),
                    DemoReport.bytes(kv.path("network_bytes_written").asLong()),
                    DemoReport.bytes(alone.path("network_bytes_read").asLong()),
                    DemoReport.bytes(alone.path("network_bytes_written").asLong()), alone.path("store").asText(),
                    percent(kv.path("hit_rate").asDouble()), percent(alone.path("hit_rate").asDouble()),
                    ms(kv, "p50"), ms(alone, "p50"), ReportWording.relative(kv.path("ttft_ms").path("p50").asDouble(),
                            alone.path("ttft_ms").path("p50").asDouble()), measured(root, kv, alone)));
        }
        return out;
    }

    /** What two runs were measured under: one run each, the higher of their end loads, the cores. */
    private static String measured(JsonNode root, JsonNode a, JsonNode b) {
        return String.format(Locale.ROOT, "measured in one run each, load average up to %.2f, on %d cores",
                Math.max(a.path("load_average_1m_end").asDouble(), b.path("load_average_1m_end").asDouble()),
                root.path("machine").path("cpus").asInt());
    }

    private static JsonNode run(JsonNode root, String name) {
        for (JsonNode r : root.path("runs")) {
            if (name.equals(r.path("name").asText())) {
                return r;
            }
        }
        return null;
    }

    private static String ms(JsonNode run, String pct) {
        return SvgCharts.micros(run.path("ttft_ms").path(pct).asDouble() * 1000);
    }

    /** The side-by-side section of {@code demo.html}, with its charts, or "" outside the multi-turn workload. */
    static String html(JsonNode root) {
        if (!compared(root)) {
            return "";
        }
        StringBuilder h = new StringBuilder("<h2>Policies and stores side by side</h2><p class=\"note\">Prompt tokens"
                + " recomputed: by every engine, P and D. Prefix hit rate: the share of prompt tokens no engine computed"
                + " (a prefix cache served them, or the store). Decode-only: requests sent to D"
                + " alone, whose prompt the store held whole or but for a short suffix (+suffix: those of the second"
                + " kind, where D computed the suffix). Network read: bytes the engines read from the tiers that are not in"
                + " this host's memory.</p><pre>").append(escape(table(root))).append("</pre>");
        List<SvgCharts.Value> recomputed = new ArrayList<>();
        List<SvgCharts.Value> network = new ArrayList<>();
        for (JsonNode r : root.path("runs")) {
            recomputed.add(new SvgCharts.Value(r.path("name").asText(), r.path("prompt_tokens_recomputed").asDouble()));
            if (r.has("network_bytes_read")) {
                network.add(new SvgCharts.Value(r.path("name").asText(),
                        r.path("network_bytes_read").asDouble() / (1 << 20)));
            }
        }
        h.append("<h3>Prompt tokens recomputed</h3>").append(SvgCharts.values(recomputed, v -> SvgCharts.number(v)));
        if (!network.isEmpty()) {
            h.append("<h3>Bytes read over the network (MiB)</h3>").append(SvgCharts.values(network,
                    v -> SvgCharts.number(v) + " MiB"));
        }
        return h.toString();
    }
}
