package dev.kvconnector.benchmarks.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Writes {@code REPORT.md} and {@code latency.svg} from JMH JSON results.
 *
 * <pre>
 * java -cp benchmarks.jar dev.kvconnector.benchmarks.report.ReportMain --out DIR --mode quick
 *     [--load-before "0.52 0.61 0.70"] [--load-after "..."] [--merge-to DIR/jmh-quick.json] result.json...
 * </pre>
 * With {@code --merge-to}, the inputs are also written there as one JMH JSON array, so a run made of several JMH
 * invocations leaves one results file. The {@code REPORT.md} being replaced keeps its hand-written part, from the
 * heading {@link #KEPT_SECTION} to its end, after the generated tables.
 */
public final class ReportMain {
    /**
     * The heading of the first hand-written section: {@link #main} carries it and every section after it over from
     * the report it replaces.
     */
    static final String KEPT_SECTION = "## Connector core: before and after";

    /**
     * The machine the run was made on.
     *
     * @param cpu CPU model
     * @param cores logical CPUs the JVM sees
     * @param kernel kernel release
     * @param jdk the benchmarks' JVM
     * @param loadBefore load average (1, 5, 15 min) when the run started
     * @param loadAfter load average when it ended
     */
    public record Machine(String cpu, int cores, String kernel, String jdk, String loadBefore, String loadAfter) {
    }

    private ReportMain() {
    }

    /** Entry point; see the class comment for the arguments. */
    public static void main(String[] args) throws IOException {
        Map<String, String> opts = new LinkedHashMap<>();
        List<Path> inputs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].startsWith("--")) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(args[i] + " needs a value");
                }
                opts.put(args[i].substring(2), args[++i]);
            } else {
                inputs.add(Path.of(args[i]));
            }
        }
        if (inputs.isEmpty() || !opts.containsKey("out")) {
            System.err.println("usage: ReportMain --out DIR --mode MODE [--load-before L] [--load-after L] "
                    + "[--merge-to FILE] result.json...");
            System.exit(2);
        }
        Path out = Path.of(opts.get("out"));
        Files.createDirectories(out);
        if (opts.containsKey("merge-to")) {
            merge(inputs, Path.of(opts.get("merge-to")));
        }
        List<BenchResult> results = BenchResult.read(inputs);
        String jdk = results.isEmpty() ? System.getProperty("java.vm.version") : results.getFirst().jdk();
        Machine machine = new Machine(cpuModel(), Runtime.getRuntime().availableProcessors(), kernel(), jdk,
                opts.getOrDefault("load-before", loadAverage()), opts.getOrDefault("load-after", loadAverage()));
        String mode = opts.getOrDefault("mode", "?");
        List<LatencyTable.Row> rows = LatencyTable.build(results);
        Path report = out.resolve("REPORT.md");
        String kept = Files.exists(report) ? keptSection(Files.readString(report)) : "";
        Files.writeString(report, markdown(rows, results, machine, mode,
                Instant.now().truncatedTo(ChronoUnit.SECONDS).toString()) + kept);
        Files.writeString(out.resolve("latency.svg"), LatencyChart.render(rows,
                "Median per-layer latency (" + mode + " run; log axes)"));
        System.out.println("wrote " + out.resolve("REPORT.md") + " and " + out.resolve("latency.svg") + " from "
                + results.size() + " results");
    }

    /**
     * The hand-written part of an earlier report, from {@link #KEPT_SECTION} to the end, with a blank line in front;
     * empty when there is none. Its figures come from runs that one generated report cannot hold (a before and an
     * after on two builds, two-process runs, runs with their own floors), so a new run keeps them instead of
     * dropping them.
     */
    static String keptSection(String report) {
        int start = report.indexOf(KEPT_SECTION);
        if (start < 0) {
            return "";
        }
        return "\n" + report.substring(start).stripTrailing() + "\n";
    }

    /** Concatenates JMH JSON arrays into one. */
    static void merge(List<Path> inputs, Path to) throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        ArrayNode all = mapper.createArrayNode();
        for (Path p : inputs) {
            mapper.readTree(p.toFile()).forEach(all::add);
        }
        mapper.writerWithDefaultPrettyPrinter().writeValue(to.toFile(), all);
    }

    /** The whole report. */
    public static String markdown(List<LatencyTable.Row> rows, List<BenchResult> results, Machine m, String mode,
            String when) {
        StringBuilder md = new StringBuilder();
        md.append("# Per-layer KV transfer latency (").append(mode).append(" run)\n\n");
        md.append("Generated by `benchmarks/run.sh ").append(mode).append("` at ").append(when)
                .append(". One *layer* is K and V of one transformer layer for the model preset at the prompt length "
                        + "(`KVLayout.preset(model).layerBytes(tokens)`). Connector rows move a whole request and are "
                        + "divided by the model's layer count. See `benchmarks/README.md` for what each row does.\n\n");
        md.append("## Machine\n\n");
        md.append("- CPU: ").append(m.cpu()).append(", ").append(m.cores()).append(" logical CPUs\n");
        md.append("- Kernel: ").append(m.kernel()).append('\n');
        md.append("- JDK: ").append(m.jdk()).append('\n');
        md.append("- Load average (1, 5, 15 min): ").append(m.loadBefore()).append(" at the start, ")
                .append(m.loadAfter()).append(" at the end\n");
        Set<String> settings = results.stream().map(BenchResult::settings).collect(Collectors.toCollection(LinkedHashSet::new));
        md.append("- JMH: ").append(String.join("; ", settings)).append(", sample mode, `-prof gc`\n\n");
        md.append("## Noise\n\n");
        md.append("This is a shared VM: ").append(m.cores()).append(" vCPUs, other work running beside the benchmarks "
                + "(see the load average above; anything above ").append(m.cores()).append(" means runnable threads "
                + "waited for a CPU). Absolute times here are not the machine's best and move between runs. "
                + "Quote the ratios: every backend, its floor and its peer ran in the same run, one after another, "
                + "under the same conditions. Medians resist the noise far better than means; p99 shows it.\n\n");
        md.append("![median per-layer latency against tokens](latency.svg)\n\n");
        glance(md, rows);
        String shape = "";
        for (LatencyTable.Row r : rows) {
            String s = r.model() + "@" + r.tokens();
            if (!s.equals(shape)) {
                shape = s;
                md.append("\n## ").append(r.model()).append(", ").append(r.tokens()).append(" tokens: ")
                        .append(bytes(r.layerBytes())).append(" per layer, ").append(r.layers()).append(" layers\n\n");
                md.append("| backend | op | p50 per layer | p99 per layer | GB/s at p50 | heap alloc per layer "
                        + "| vs floor | vs peer |\n");
                md.append("|---|---|---:|---:|---:|---:|---|---|\n");
            }
            md.append("| ").append(r.series().backend()).append(" | ").append(r.series().op())
                    .append(r.series().perRequest() ? " (request / " + r.layers() + ")" : "").append(" | ")
                    .append(micros(r.p50Us())).append(" | ").append(micros(r.p99Us())).append(" | ")
                    .append(r.series().movesLayer() ? String.format(Locale.ROOT, "%.2f", r.gbPerSecond()) : "n/a")
                    .append(" | ")
                    .append(Double.isNaN(r.allocPerLayer()) ? "n/a" : bytes(Math.round(r.allocPerLayer())))
                    .append(" | ").append(floorCell(r)).append(" | ").append(peerCell(r)).append(" |\n");
        }
        return md.toString();
    }

    /** One line per model and tokens, one column per non-floor series: its ratio to its floor. */
    private static void glance(StringBuilder md, List<LatencyTable.Row> rows) {
        List<String> columns = new ArrayList<>();
        Map<String, Map<String, LatencyTable.Row>> byShape = new LinkedHashMap<>();
        for (LatencyTable.Row r : rows) {
            if (Double.isNaN(r.floorRatio())) {
                continue;
            }
            String col = r.series().label();
            if (!columns.contains(col)) {
                columns.add(col);
            }
            byShape.computeIfAbsent(r.model() + " | " + r.tokens(), k -> new LinkedHashMap<>()).put(col, r);
        }
        if (columns.isEmpty()) {
            return;
        }
        md.append("## Ratios at a glance\n\n");
        md.append("Median per layer over the median of its floor at the same size: memcpy of one layer for in-process "
                + "stores, one copy of the whole request (the same-working-set floor, from DRAM) for in-process "
                + "connector rows, which move a request (the per-model tables put the hot floor beside it), and the "
                + "raw socket's send+ack for puts and fetch for gets over the network. 1.00x is the floor; lower is "
                + "better.\n\n");
        md.append("| model | tokens | ").append(String.join(" | ", columns)).append(" |\n");
        md.append("|---|---:|").append("---:|".repeat(columns.size())).append('\n');
        for (var e : byShape.entrySet()) {
            md.append("| ").append(e.getKey());
            for (String c : columns) {
                LatencyTable.Row r = e.getValue().get(c);
                md.append(" | ").append(r == null ? "" : ratio(r.floorRatio()));
            }
            md.append(" |\n");
        }
    }

    private static String floorCell(LatencyTable.Row r) {
        if (r.series().role() == Series.Role.FLOOR) {
            return "floor";
        }
        return Double.isNaN(r.floorRatio()) ? "" : ratio(r.floorRatio()) + " " + r.floor();
    }

    private static String peerCell(LatencyTable.Row r) {
        return r.peers().stream().map(p -> ratio(p.ratio()) + " " + p.to()).collect(Collectors.joining(", "));
    }

    /** {@code 1.23x}. */
    static String ratio(double v) {
        return String.format(Locale.ROOT, "%.2fx", v);
    }

    /** Microseconds with sensible precision. */
    static String micros(double us) {
        if (us < 10) {
            return String.format(Locale.ROOT, "%.2f us", us);
        }
        return us < 1000 ? String.format(Locale.ROOT, "%.1f us", us) : String.format(Locale.ROOT, "%.0f us", us);
    }

    /** Bytes in B, KiB or MiB. */
    static String bytes(long b) {
        if (b < 1024) {
            return b + " B";
        }
        return b < (1 << 20) ? String.format(Locale.ROOT, "%.1f KiB", b / 1024.0)
                : String.format(Locale.ROOT, "%.2f MiB", b / (double) (1 << 20));
    }

    private static String cpuModel() {
        try {
            return Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name"))
                    .map(l -> l.substring(l.indexOf(':') + 1).strip()).findFirst().orElse("unknown");
        } catch (IOException e) {
            return System.getProperty("os.arch");
        }
    }

    private static String kernel() {
        try {
            return "Linux " + Files.readString(Path.of("/proc/sys/kernel/osrelease")).strip();
        } catch (IOException e) {
            return System.getProperty("os.name") + " " + System.getProperty("os.version");
        }
    }

    private static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).strip().split("\\s+");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "unknown";
        }
    }
}
