package dev.kvconnector.benchmarks.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One JMH result, as much of it as the report uses.
 *
 * @param benchmark the fully qualified benchmark method, {@code pkg.Class.method}
 * @param params the JMH parameters ({@code model}, {@code tokens}, {@code store})
 * @param p50Us median time per operation, microseconds
 * @param p99Us 99th percentile per operation, microseconds (the median again where the mode has no percentiles)
 * @param samples how many operations JMH sampled (the measured operation count in sample mode), or -1 if unknown
 * @param allocBytesPerOp {@code gc.alloc.rate.norm}, bytes per operation; NaN without {@code -prof gc}
 * @param jdk the forked JVM's version
 * @param settings warmup and measurement settings, for the report's footer
 */
public record BenchResult(String benchmark, Map<String, String> params, double p50Us, double p99Us, long samples,
        double allocBytesPerOp, String jdk, String settings) {

    /** The benchmark class's simple name. */
    public String className() {
        String[] parts = benchmark.split("\\.");
        return parts.length >= 2 ? parts[parts.length - 2] : benchmark;
    }

    /** The benchmark method's name. */
    public String method() {
        return benchmark.substring(benchmark.lastIndexOf('.') + 1);
    }

    /** A parameter, or {@code fallback} when the benchmark has none of that name. */
    public String param(String name, String fallback) {
        return params.getOrDefault(name, fallback);
    }

    /** Reads every result from JMH JSON files ({@code -rf json}), in order. */
    public static List<BenchResult> read(List<Path> files) throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        List<BenchResult> out = new ArrayList<>();
        for (Path f : files) {
            out.addAll(parse(mapper.readTree(f.toFile())));
        }
        return out;
    }

    /** Parses the top-level array JMH writes. */
    public static List<BenchResult> parse(JsonNode root) {
        if (!root.isArray()) {
            throw new IllegalArgumentException("JMH JSON is an array of results, found " + root.getNodeType());
        }
        List<BenchResult> out = new ArrayList<>();
        for (JsonNode r : root) {
            JsonNode pm = r.path("primaryMetric");
            double scale = toMicros(pm.path("scoreUnit").asText("us/op"));
            double score = pm.path("score").asDouble(Double.NaN);
            JsonNode pct = pm.path("scorePercentiles");
            double p50 = pct.has("50.0") ? pct.get("50.0").asDouble() : score;
            double p99 = pct.has("99.0") ? pct.get("99.0").asDouble() : p50;
            Map<String, String> params = new LinkedHashMap<>();
            r.path("params").properties().forEach(e -> params.put(e.getKey(), e.getValue().asText()));
            double alloc = Double.NaN;
            for (var e : r.path("secondaryMetrics").properties()) {
                // JMH before 1.36 prefixed profiler metrics with a middle dot.
                if (e.getKey().replace("\u00b7", "").equals("gc.alloc.rate.norm")) {
                    alloc = e.getValue().path("score").asDouble(Double.NaN);
                }
            }
            String settings = r.path("forks").asInt() + " fork(s), warmup " + r.path("warmupIterations").asInt()
                    + " x " + r.path("warmupTime").asText() + ", measurement " + r.path("measurementIterations").asInt()
                    + " x " + r.path("measurementTime").asText();
            out.add(new BenchResult(r.path("benchmark").asText(), Map.copyOf(params), p50 * scale, p99 * scale,
                    sampleCount(pm), alloc, r.path("jdkVersion").asText("?") + " (" + r.path("vmVersion").asText("?") + ")",
                    settings));
        }
        return out;
    }

    private static long sampleCount(JsonNode pm) {
        JsonNode hist = pm.path("rawDataHistogram");
        if (!hist.isArray()) {
            return -1;
        }
        long n = 0;
        for (JsonNode fork : hist) {
            for (JsonNode iteration : fork) {
                for (JsonNode bucket : iteration) {
                    n += bucket.path(1).asLong();
                }
            }
        }
        return n;
    }

    private static double toMicros(String unit) {
        return switch (unit) {
            case "ns/op" -> 1e-3;
            case "us/op" -> 1;
            case "ms/op" -> 1e3;
            case "s/op" -> 1e6;
            default -> throw new IllegalArgumentException("the report needs time per operation, found " + unit
                    + "; run with -bm sample or -bm avgt");
        };
    }
}
