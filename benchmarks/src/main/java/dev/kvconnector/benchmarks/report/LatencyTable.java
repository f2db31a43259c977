package dev.kvconnector.benchmarks.report;

import dev.kvconnector.layout.KVLayout;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The report's rows: one per benchmark result, in per-layer terms, with ratios to the floor and the peers measured
 * in the same run at the same model and tokens.
 */
public final class LatencyTable {

    /**
     * One row.
     *
     * @param model model preset
     * @param tokens prompt tokens
     * @param layerBytes bytes of one layer
     * @param layers the model's layer count
     * @param series what was measured
     * @param p50Us median per layer, microseconds (a request's median divided by the layer count for per-request series)
     * @param p99Us 99th percentile per layer, microseconds, divided the same way
     * @param allocPerLayer heap bytes allocated per layer ({@code gc.alloc.rate.norm}), NaN when not profiled
     * @param floor the floor's label, or empty when the row is a floor or has none
     * @param floorRatio {@code p50Us} over the floor's, NaN without a floor
     * @param peers ratios to the peer libraries' same operation ({@code p50Us} over theirs)
     */
    public record Row(String model, int tokens, long layerBytes, int layers, Series series, double p50Us, double p99Us,
            double allocPerLayer, String floor, double floorRatio, List<Ratio> peers) {

        /** Throughput of one layer at the median, GB/s (10^9 bytes per second). */
        public double gbPerSecond() {
            return layerBytes / (p50Us * 1e3);
        }
    }

    /**
     * A ratio to a named reference.
     *
     * @param to the reference's label
     * @param ratio this row's median over the reference's
     */
    public record Ratio(String to, double ratio) {
    }

    private LatencyTable() {
    }

    /** Builds the rows, sorted by model size, tokens, then floors, peers and ours. */
    public static List<Row> build(List<BenchResult> results) {
        Map<String, List<BenchResult>> byShape = new LinkedHashMap<>();
        for (BenchResult r : results) {
            if ("?".equals(r.param("model", "?"))) {
                continue; // not a per-layer benchmark (for example the binding's per-call cost)
            }
            byShape.computeIfAbsent(r.param("model", "?") + "@" + r.param("tokens", "0"), k -> new ArrayList<>()).add(r);
        }
        List<Row> rows = new ArrayList<>();
        for (List<BenchResult> shape : byShape.values()) {
            List<Row> plain = new ArrayList<>();
            for (BenchResult r : shape) {
                plain.add(perLayer(r));
            }
            for (Row row : plain) {
                rows.add(withRatios(row, plain));
            }
        }
        rows.sort(Comparator.comparingLong((Row r) -> bytesPerToken(r.model())).thenComparing(Row::model)
                .thenComparingInt(Row::tokens).thenComparing(r -> r.series().role())
                .thenComparing(r -> r.series().backend()).thenComparing(r -> r.series().direction()));
        return rows;
    }

    private static long bytesPerToken(String model) {
        try {
            return KVLayout.preset(model).bytesPerTokenPerLayer();
        } catch (RuntimeException unknown) {
            return Long.MAX_VALUE;
        }
    }

    private static Row perLayer(BenchResult r) {
        Series s = Series.of(r);
        String model = r.param("model", "?");
        int tokens = Integer.parseInt(r.param("tokens", "0"));
        KVLayout layout = KVLayout.preset(model);
        int layers = layout.numLayers();
        double div = s.perRequest() ? layers : 1;
        return new Row(model, tokens, layout.layerBytes(tokens), layers, s, r.p50Us() / div, r.p99Us() / div,
                r.allocBytesPerOp() / div, "", Double.NaN, List.of());
    }

    private static Row withRatios(Row row, List<Row> shape) {
        Series s = row.series();
        Optional<Row> floor = s.role() == Series.Role.FLOOR ? Optional.empty() : floorFor(s, shape);
        List<Ratio> peers = new ArrayList<>();
        Optional<Row> hot = wholeRequestInMemory(s)
                ? shape.stream().filter(f -> f.series().backend().equals(Series.HOT_FLOOR)).findFirst()
                : Optional.empty();
        if (hot.isPresent()) {
            peers.add(new Ratio(hot.get().series().label(), row.p50Us() / hot.get().p50Us()));
        } else if (s.role() == Series.Role.OURS) {
            for (Row p : shape) {
                Series ps = p.series();
                boolean memoryPeer = s.domain() == Series.Domain.MEMORY && !handOver(s)
                        && ps.backend().equals("chronicle-bytes");
                boolean redisPeer = s.speaksRedis() && ps.role() == Series.Role.PEER
                        && ps.domain() == Series.Domain.NETWORK && ps.direction() == s.direction();
                boolean twoCorePeer = handOver(s) && ps.role() == Series.Role.PEER && handOver(ps);
                if (memoryPeer || redisPeer || twoCorePeer) {
                    peers.add(new Ratio(ps.label(), row.p50Us() / p.p50Us()));
                }
            }
        }
        return new Row(row.model(), row.tokens(), row.layerBytes(), row.layers(), s, row.p50Us(), row.p99Us(),
                row.allocPerLayer(), floor.map(f -> f.series().label()).orElse(""),
                floor.map(f -> row.p50Us() / f.p50Us()).orElse(Double.NaN), List.copyOf(peers));
    }

    /** A hand-over between processes copies the layer twice: its floor is two memcpys, not one. */
    private static boolean handOver(Series s) {
        return s.direction() == Series.Direction.HAND_OVER;
    }

    /**
     * A whole request moved in this process (ours, or a reference copy of one): it streams the request's bytes from DRAM, so its floor is a copy of the
     * same working set, where one was measured, and the hot floor (one layer from cache) is shown beside it.
     */
    private static boolean wholeRequestInMemory(Series s) {
        return s.domain() == Series.Domain.MEMORY && s.perRequest() && s.role() != Series.Role.FLOOR;
    }

    private static Optional<Row> floorFor(Series s, List<Row> shape) {
        if (wholeRequestInMemory(s)) {
            Optional<Row> sameWorkingSet = shape.stream()
                    .filter(f -> f.series().backend().equals(Series.SAME_WORKING_SET_FLOOR)).findFirst();
            if (sameWorkingSet.isPresent()) {
                return sameWorkingSet;
            }
        }
        return shape.stream().filter(f -> f.series().role() == Series.Role.FLOOR).filter(f -> switch (s.domain()) {
            case MEMORY -> f.series().backend().equals("memcpy") && handOver(f.series()) == handOver(s);
            case NETWORK -> f.series().backend().equals("socket") && f.series().direction() == s.direction();
            case OTHER -> false;
        }).findFirst();
    }
}
