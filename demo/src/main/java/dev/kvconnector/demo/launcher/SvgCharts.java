package dev.kvconnector.demo.launcher;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.DoubleFunction;

/**
 * The report's hand-written inline SVG charts. Every value axis has ticks and grid lines; a log axis has one tick
 * per power of ten, so values a thousand times apart are all visible.
 */
final class SvgCharts {
    static final String[] COLORS = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
    private static final String GRID = "#ddd";

    private SvgCharts() {
    }

    /** One bar of a {@link #bars} chart: a label and its p50 and p99. */
    record Bar(String label, double p50, double p99) {
    }

    /** Where a value lands on an axis of {@code width} pixels, and the axis's ticks. */
    interface Axis {
        double x(double value);

        List<double[]> ticks();

        String tickLabel(double value);
    }

    /** A linear axis from 0 to a round number at or above {@code max}, with 4 to 10 ticks. */
    static Axis linear(double max, double width, DoubleFunction<String> label) {
        double step = niceStep(max <= 0 ? 1 : max);
        double end = Math.max(step, Math.ceil((max <= 0 ? 1 : max) / step) * step);
        return new Axis() {
            @Override
            public double x(double value) {
                return Math.clamp(value / end, 0, 1) * width;
            }

            @Override
            public List<double[]> ticks() {
                List<double[]> t = new ArrayList<>();
                for (int k = 0; k * step <= end + step / 1e6; k++) {
                    t.add(new double[] {k * step, x(k * step)});
                }
                return t;
            }

            @Override
            public String tickLabel(double value) {
                return label.apply(value);
            }
        };
    }

    /**
     * A log axis over whole powers of ten around the positive values in {@code [min, max]}; a value below the first
     * power lands at the axis's start.
     */
    static Axis log(double min, double max, double width, DoubleFunction<String> label) {
        int lo = (int) Math.floor(Math.log10(min > 0 ? min : 1));
        int hi = Math.max(lo + 1, (int) Math.ceil(Math.log10(max > 0 ? max : 10)));
        return new Axis() {
            @Override
            public double x(double value) {
                return value <= 0 ? 0 : Math.clamp((Math.log10(value) - lo) / (hi - lo), 0, 1) * width;
            }

            @Override
            public List<double[]> ticks() {
                List<double[]> t = new ArrayList<>();
                for (int e = lo; e <= hi; e++) {
                    double v = Math.pow(10, e);
                    t.add(new double[] {v, x(v)});
                }
                return t;
            }

            @Override
            public String tickLabel(double value) {
                return label.apply(value);
            }
        };
    }

    /** 1, 2 or 5 times a power of ten, so that {@code max} spans 4 to 10 steps. */
    static double niceStep(double max) {
        double raw = max / 5;
        double p = Math.pow(10, Math.floor(Math.log10(raw)));
        double m = raw / p;
        return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
    }

    /** Up to 3 significant digits, no trailing zeros, no exponent: {@code 0.1}, {@code 25}, {@code 1700}. */
    static String number(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        return new java.math.BigDecimal(String.format(Locale.ROOT, "%.3g", v)).stripTrailingZeros().toPlainString();
    }

    /** A duration given in µs, in the unit that reads best: {@code 850 µs}, {@code 12 ms}, {@code 1.7 s}. */
    static String micros(double us) {
        if (us >= 1_000_000) {
            return number(round3(us / 1_000_000)) + " s";
        }
        if (us >= 1000) {
            return number(round3(us / 1000)) + " ms";
        }
        return number(round3(us)) + " µs";
    }

    private static void axis(StringBuilder s, Axis axis, int left, int top, int bottom) {
        for (double[] t : axis.ticks()) {
            double x = left + t[1];
            s.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>"
                    + "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%s</text>", x, top, x, bottom,
                    GRID, x, bottom + 12, escape(axis.tickLabel(t[0]))));
        }
    }

    private static String open(int width, int height) {
        return String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">",
                width, height);
    }

    /** Horizontal stacked bars, one per label, on a linear axis in ms. */
    static String stacked(List<String> labels, List<double[]> stacks, String[] parts) {
        double max = stacks.stream().mapToDouble(s -> Arrays.stream(s).sum()).max().orElse(1);
        int rowH = 28;
        int left = 150;
        int width = 600;
        Axis axis = linear(max, width, v -> number(v) + " ms");
        int plotBottom = labels.size() * rowH + 5;
        StringBuilder s = new StringBuilder(open(left + width + 80, plotBottom + 45));
        axis(s, axis, left, 0, plotBottom);
        for (int i = 0; i < labels.size(); i++) {
            int y = i * rowH + 5;
            s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>", y + 15,
                    escape(labels.get(i))));
            double sum = 0;
            for (int k = 0; k < stacks.get(i).length; k++) {
                double v = stacks.get(i)[k];
                double x = left + axis.x(sum);
                double w = axis.x(sum + v) - axis.x(sum);
                s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"%s\">"
                        + "<title>%s: %.1f ms</title></rect>", x, y, w, COLORS[k], escape(parts[k]), v));
                sum += v;
            }
            s.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\">%.0f ms</text>",
                    left + axis.x(sum) + 5, y + 15, sum));
        }
        legend(s, parts, plotBottom + 38);
        return s.append("</svg>").toString();
    }

    /** Horizontal p50 and p99 bars per label, each with its value printed, on the given axis. */
    static String bars(List<Bar> bars, Axis axis, int width, DoubleFunction<String> valueLabel) {
        int left = 230;
        int rowH = 44;
        int plotBottom = bars.size() * rowH + 5;
        StringBuilder s = new StringBuilder(open(left + width + 110, plotBottom + 45));
        axis(s, axis, left, 0, plotBottom);
        for (int i = 0; i < bars.size(); i++) {
            Bar b = bars.get(i);
            int y = i * rowH + 5;
            s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>", y + 22,
                    escape(b.label())));
            double[] vs = {b.p50(), b.p99()};
            String[] ps = {"p50", "p99"};
            for (int k = 0; k < 2; k++) {
                bar(s, left, y + k * 18, axis.x(vs[k]), COLORS[k], ps[k] + " " + valueLabel.apply(vs[k]));
            }
        }
        legend(s, new String[] {"p50", "p99"}, plotBottom + 38);
        return s.append("</svg>").toString();
    }

    /** A bar 16 px high from {@code left}, at least 1 px wide so a zero shows, with {@code text} after its end. */
    private static void bar(StringBuilder s, int left, int y, double width, String color, String text) {
        double w = Math.max(1, width);
        s.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>"
                + "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>", left, y, w, color, left + w + 4, y + 12,
                escape(text)));
    }

    /** One bar of a {@link #values} chart: a label and its value. */
    record Value(String label, double value) {
    }

    /** One horizontal bar per label on a linear axis from 0, each with its value printed. */
    static String values(List<Value> values, DoubleFunction<String> valueLabel) {
        int left = 230;
        int width = 550;
        int rowH = 24;
        Axis axis = linear(values.stream().mapToDouble(Value::value).max().orElse(1), width, valueLabel);
        int plotBottom = values.size() * rowH + 5;
        StringBuilder s = new StringBuilder(open(left + width + 110, plotBottom + 25));
        axis(s, axis, left, 0, plotBottom);
        for (int i = 0; i < values.size(); i++) {
            Value v = values.get(i);
            int y = i * rowH + 5;
            s.append(String.format(Locale.ROOT, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>", y + 13,
                    escape(v.label())));
            bar(s, left, y, axis.x(v.value()), COLORS[0], valueLabel.apply(v.value()));
        }
        return s.append("</svg>").toString();
    }

    private static double round3(double v) {
        return v >= 100 || v <= 0 ? Math.rint(v) : Double.parseDouble(String.format(Locale.ROOT, "%.3g", v));
    }

    /** One request of a timeline: when it started, got its first token and ended, in ms of its run's clock. */
    record Span(int index, int promptTokens, double startMs, double firstTokenMs, double endMs) {
    }

    /**
     * One line per request: waiting for the first token, then decoding, on an axis that ends at {@code endMs}:
     * give every run's timeline the same {@code endMs} and they share one scale.
     */
    static String timeline(List<Span> spans, double endMs) {
        int left = 10;
        int width = 800;
        Axis axis = linear(endMs / 1000, width, v -> number(v) + " s");
        int rowH = Math.max(3, Math.min(12, 400 / Math.max(1, spans.size())));
        int plotBottom = spans.size() * rowH;
        StringBuilder s = new StringBuilder(open(left + width + 30, plotBottom + 50));
        axis(s, axis, left, 0, plotBottom);
        for (int i = 0; i < spans.size(); i++) {
            Span x = spans.get(i);
            double a = left + axis.x(x.startMs() / 1000);
            double b = left + axis.x(Math.max(x.firstTokenMs(), x.startMs()) / 1000);
            double c = left + axis.x(x.endMs() / 1000);
            int y = i * rowH;
            s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    + "<title>request %d (%d prompt tokens): first token after %.0f ms</title></rect>", a, y,
                    Math.max(0.5, b - a), rowH - 1, COLORS[0], x.index(), x.promptTokens(),
                    x.firstTokenMs() - x.startMs()));
            s.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                    + "<title>request %d: decode %.0f ms</title></rect>", b, y, Math.max(0.5, c - b), rowH - 1,
                    COLORS[1], x.index(), x.endMs() - x.firstTokenMs()));
        }
        legend(s, new String[] {"until the first token", "decode"}, plotBottom + 40);
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

    static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
