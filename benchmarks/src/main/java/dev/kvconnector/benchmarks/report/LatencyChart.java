package dev.kvconnector.benchmarks.report;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * A hand-written SVG: median per-layer latency against prompt tokens, one panel per model, one line per backend and
 * operation, both axes logarithmic. No library, so the output is plain, stable and easy to review in a diff.
 */
public final class LatencyChart {
    private static final String[] COLOURS = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};
    private static final int PANEL_W = 300;
    private static final int PANEL_H = 260;
    private static final int LEFT = 70;
    private static final int TOP = 40;
    private static final int GAP = 40;
    private static final int LEGEND_ROW = 18;

    private LatencyChart() {
    }

    /** Renders the rows as an SVG document. */
    public static String render(List<LatencyTable.Row> rows, String title) {
        List<String> models = new ArrayList<>();
        Map<String, String> colour = new LinkedHashMap<>();
        TreeSet<Integer> allTokens = new TreeSet<>();
        double lo = Double.MAX_VALUE;
        double hi = 0;
        for (LatencyTable.Row r : rows) {
            if (!models.contains(r.model())) {
                models.add(r.model());
            }
            colour.computeIfAbsent(r.series().label(), k -> COLOURS[colour.size() % COLOURS.length]);
            allTokens.add(r.tokens());
            if (r.p50Us() > 0) {
                lo = Math.min(lo, r.p50Us());
                hi = Math.max(hi, r.p50Us());
            }
        }
        if (rows.isEmpty()) {
            lo = 1;
            hi = 10;
        }
        double yMin = Math.pow(10, Math.floor(Math.log10(lo)));
        double yMax = Math.pow(10, Math.ceil(Math.log10(hi)));
        if (yMax <= yMin) {
            yMax = yMin * 10;
        }
        int legendRows = (colour.size() + 2) / 3;
        int width = LEFT + Math.max(1, models.size()) * (PANEL_W + GAP);
        int height = TOP + PANEL_H + 60 + legendRows * LEGEND_ROW + 20;
        StringBuilder svg = new StringBuilder();
        svg.append("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"").append(width).append("\" height=\"")
                .append(height).append("\" viewBox=\"0 0 ").append(width).append(' ').append(height)
                .append("\" font-family=\"sans-serif\" font-size=\"11\">\n");
        svg.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
        svg.append(text(LEFT, 20, escape(title), "font-size=\"14\" font-weight=\"bold\""));
        for (int m = 0; m < models.size(); m++) {
            String model = models.get(m);
            int x0 = LEFT + m * (PANEL_W + GAP);
            panel(svg, rows, model, x0, allTokens, yMin, yMax, colour, m == 0);
        }
        int ly = TOP + PANEL_H + 50;
        int i = 0;
        for (var e : colour.entrySet()) {
            int lx = LEFT + (i % 3) * 260;
            int y = ly + (i / 3) * LEGEND_ROW;
            svg.append("<line x1=\"").append(lx).append("\" y1=\"").append(y - 4).append("\" x2=\"").append(lx + 20)
                    .append("\" y2=\"").append(y - 4).append("\" stroke=\"").append(e.getValue())
                    .append("\" stroke-width=\"2\"/>\n");
            svg.append(text(lx + 26, y, escape(e.getKey()), ""));
            i++;
        }
        svg.append("</svg>\n");
        return svg.toString();
    }

    private static void panel(StringBuilder svg, List<LatencyTable.Row> rows, String model, int x0,
            TreeSet<Integer> tokens, double yMin, double yMax, Map<String, String> colour, boolean yLabels) {
        svg.append("<g>\n");
        svg.append("<rect x=\"").append(x0).append("\" y=\"").append(TOP).append("\" width=\"").append(PANEL_W)
                .append("\" height=\"").append(PANEL_H).append("\" fill=\"none\" stroke=\"#999\"/>\n");
        svg.append(text(x0 + PANEL_W / 2.0, TOP - 6, escape(model), "text-anchor=\"middle\" font-weight=\"bold\""));
        for (double d = yMin; d <= yMax * 1.0001; d *= 10) {
            double y = yOf(d, yMin, yMax);
            svg.append("<line x1=\"").append(x0).append("\" y1=\"").append(fmt(y)).append("\" x2=\"")
                    .append(x0 + PANEL_W).append("\" y2=\"").append(fmt(y)).append("\" stroke=\"#eee\"/>\n");
            if (yLabels) {
                svg.append(text(x0 - 6, y + 4, axisMicros(d), "text-anchor=\"end\""));
            }
        }
        for (int t : tokens) {
            double x = xOf(t, tokens, x0);
            svg.append(text(x, TOP + PANEL_H + 16, Integer.toString(t), "text-anchor=\"middle\""));
        }
        svg.append(text(x0 + PANEL_W / 2.0, TOP + PANEL_H + 32, "prompt tokens", "text-anchor=\"middle\""));
        if (yLabels) {
            svg.append(text(14, TOP + PANEL_H / 2.0, "median per layer",
                    "text-anchor=\"middle\" transform=\"rotate(-90 14 " + fmt(TOP + PANEL_H / 2.0) + ")\""));
        }
        Map<String, List<LatencyTable.Row>> lines = new LinkedHashMap<>();
        for (LatencyTable.Row r : rows) {
            if (r.model().equals(model) && r.p50Us() > 0) {
                lines.computeIfAbsent(r.series().label(), k -> new ArrayList<>()).add(r);
            }
        }
        for (var e : lines.entrySet()) {
            String c = colour.get(e.getKey());
            List<LatencyTable.Row> pts = new ArrayList<>(e.getValue());
            pts.sort((a, b) -> Integer.compare(a.tokens(), b.tokens()));
            if (pts.size() > 1) {
                StringBuilder d = new StringBuilder();
                for (LatencyTable.Row p : pts) {
                    d.append(d.isEmpty() ? "" : " ").append(fmt(xOf(p.tokens(), tokens, x0))).append(',')
                            .append(fmt(yOf(p.p50Us(), yMin, yMax)));
                }
                svg.append("<polyline fill=\"none\" stroke=\"").append(c).append("\" stroke-width=\"1.5\" points=\"")
                        .append(d).append("\"/>\n");
            }
            for (LatencyTable.Row p : pts) {
                svg.append("<circle cx=\"").append(fmt(xOf(p.tokens(), tokens, x0))).append("\" cy=\"")
                        .append(fmt(yOf(p.p50Us(), yMin, yMax))).append("\" r=\"3\" fill=\"").append(c)
                        .append("\"><title>").append(escape(e.getKey() + ", " + p.tokens() + " tokens: "
                                + String.format(Locale.ROOT, "%.1f us", p.p50Us())))
                        .append("</title></circle>\n");
            }
        }
        svg.append("</g>\n");
    }

    private static double xOf(int tokens, TreeSet<Integer> all, int x0) {
        double lo = Math.log(all.first());
        double hi = Math.log(all.last());
        double f = hi > lo ? (Math.log(tokens) - lo) / (hi - lo) : 0.5;
        return x0 + 20 + f * (PANEL_W - 40);
    }

    private static double yOf(double us, double yMin, double yMax) {
        double f = (Math.log10(us) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin));
        return TOP + PANEL_H - f * PANEL_H;
    }

    private static String axisMicros(double us) {
        return us >= 1000 ? String.format(Locale.ROOT, "%.0f ms", us / 1000)
                : us >= 1 ? String.format(Locale.ROOT, "%.0f us", us) : String.format(Locale.ROOT, "%.2g us", us);
    }

    private static String text(double x, double y, String body, String attrs) {
        return "<text x=\"" + fmt(x) + "\" y=\"" + fmt(y) + "\"" + (attrs.isEmpty() ? "" : " " + attrs) + ">" + body
                + "</text>\n";
    }

    private static String fmt(double v) {
        return String.format(Locale.ROOT, "%.1f", v);
    }

    /** Escapes text for XML content and attribute values. */
    static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
