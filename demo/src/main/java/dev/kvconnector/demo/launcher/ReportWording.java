package dev.kvconnector.demo.launcher;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The report's sentences, worded from {@code demo.json}'s numbers alone: how each XpYd run compared with the single
 * engine, and the load, cores and processes it was measured under. Nothing here claims more than one run shows.
 */
final class ReportWording {
    private ReportWording() {
    }

    private static int cpus(JsonNode root) {
        return root.path("machine").path("cpus").asInt();
    }

    /**
     * One sentence per XpYd run comparing it with the single engine: time to first token (p50) and the whole run,
     * each as "x% less time" or "x% more time", with the load it ran under.
     */
    static List<String> findings(JsonNode root) {
        List<String> out = new ArrayList<>();
        JsonNode single = root.path("runs").get(0);
        for (JsonNode r : root.path("runs")) {
            if (r == single) {
                continue;
            }
            double ttft = r.path("ttft_ms").path("p50").asDouble();
            double ttftRef = single.path("ttft_ms").path("p50").asDouble();
            double wall = r.path("wall_ms").asDouble();
            double wallRef = single.path("wall_ms").asDouble();
            out.add(String.format(Locale.ROOT, "%s (flow %s%s): time to first token p50 %s against %s on the single"
                    + " engine, %s; the whole run %s against %s, %s (in this one run, load average %.2f at its end, on"
                    + " %d cores).", r.path("name").asText(), r.path("flow").asText(),
                    r.path("layer_wise").asBoolean() ? ", layer-wise" : "", ms(ttft), ms(ttftRef),
                    relative(ttft, ttftRef), ms(wall), ms(wallRef), relative(wall, wallRef),
                    r.path("load_average_1m_end").asDouble(), cpus(root)));
        }
        return out;
    }

    /** A duration in ms, to 3 significant digits in the unit that reads best. */
    private static String ms(double ms) {
        return SvgCharts.micros(ms * 1000);
    }

    /** {@code value} against {@code reference}, both durations: "12% less time" or "12% more time". */
    static String relative(double value, double reference) {
        if (reference <= 0 || value <= 0) {
            return "not comparable (a zero duration)";
        }
        double d = (value - reference) / reference * 100;
        if (Math.abs(d) < 0.5) {
            return "the same within 0.5%";
        }
        return String.format(Locale.ROOT, d < 0 ? "%.0f%% less time (faster)" : "%.0f%% more time (slower)",
                Math.abs(d));
    }

    /** What the numbers were measured under: how many runs, the load, the cores and the processes sharing them. */
    static String conditions(JsonNode root) {
        JsonNode cfg = root.path("config");
        int engines = cfg.path("prefill").asInt() + cfg.path("decode").asInt();
        String shared = engines > cpus(root)
                ? String.format(Locale.ROOT, "; with %d engines on %d cores, the engines competed for the CPU", engines,
                cpus(root)) : "";
        return String.format(Locale.ROOT, "Each run was measured once, on %d cores, at load average (1 min) %.2f"
                + " before the runs and %.2f after; the XpYd runs had %d engine JVMs (%d prefill, %d decode), the proxy"
                + " and %d clients on this machine at once%s.", cpus(root),
                root.path("machine").path("load_average_1m_start").asDouble(),
                root.path("machine").path("load_average_1m_end").asDouble(), engines, cfg.path("prefill").asInt(),
                cfg.path("decode").asInt(), cfg.path("clients").asInt(), shared);
    }
}
