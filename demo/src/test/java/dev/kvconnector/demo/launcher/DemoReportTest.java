package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The report's verdict and numbers, from hand-made results (no processes). */
class DemoReportTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static LoadRunner.Result result(int i, String text, List<Integer> ids, String error) {
        return new LoadRunner.Result(i, 20, 10.0 * i, 10.0 * i + 5, 10.0 * i + 9, text, ids, error);
    }

    private static DemoReport report(List<LoadRunner.Result> xpyd) {
        DemoReport.Run single = new DemoReport.Run("single", "none", false, 30,
                List.of(result(0, "ab", List.of(97, 98), null), result(1, "\uFFFD", List.of(200), null)), List.of(),
                1.0);
        return new DemoReport(JSON.createObjectNode(), 1.0, single,
                List.of(new DemoReport.Run("xpyd", "v1", false, 30, xpyd, List.of(), 1.0)));
    }

    @Test
    void equalTokensPass() {
        DemoReport r = report(List.of(result(0, "ab", List.of(97, 98), null), result(1, "\uFFFD", List.of(200), null)));
        assertTrue(r.tokensEqual(), r.mismatches().toString());
        assertTrue(r.json().path("tokens_equal").asBoolean());
    }

    @Test
    void sameTextFromOtherTokensIsAMismatch() {
        // Both malformed bytes decode to U+FFFD: only the ids tell them apart.
        DemoReport r = report(List.of(result(0, "ab", List.of(97, 98), null), result(1, "\uFFFD", List.of(201), null)));
        assertFalse(r.tokensEqual());
        assertEquals(1, r.mismatches().size());
        assertTrue(r.mismatches().getFirst().contains("request 1"), r.mismatches().getFirst());
        assertTrue(r.text().contains("TOKENS DIFFER"));
    }

    @Test
    void failedOrTokenlessAnswersAreMismatches() {
        DemoReport r = report(List.of(result(0, "ab", List.of(), null), result(1, "", List.of(), "HTTP 502: down")));
        assertEquals(2, r.mismatches().size(), r.mismatches().toString());
        assertTrue(r.html().contains("differ"));
    }

    @Test
    void percentilesAreNearestRank() {
        double[] v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        assertEquals(5, DemoReport.pct(v, 50));
        assertEquals(10, DemoReport.pct(v, 99));
        assertEquals(0, DemoReport.pct(new double[0], 50));
    }

    /** An engine's {@code /kv/metrics} answer with the given per-layer latencies (p50, p99, in µs). */
    private static ObjectNode instance(String name, double[] insert, double[] drop, double[] wait) throws Exception {
        return (ObjectNode) JSON.readTree(String.format(java.util.Locale.ROOT, """
                {"name":"%s","engine":{"requests":2,"loaded_prefills":2,"partial_loads":0,"prefill_passes":0,
                 "misses":{}},"connector":{"inserted_bytes":100,"dropped_bytes":100,
                 "insert_layer":{"count":4,"p50_us":%f,"p99_us":%f},"drop_layer":{"count":4,"p50_us":%f,"p99_us":%f},
                 "drop_wait":{"count":%d,"p50_us":%f,"p99_us":%f}}}""", name, insert[0], insert[1], drop[0], drop[1],
                wait[1] > 0 ? 4 : 0, wait[0], wait[1]));
    }

    private static List<LoadRunner.Result> results(double scale) {
        return List.of(new LoadRunner.Result(0, 20, 0, 10 * scale, 50 * scale, "ab", List.of(97, 98), null),
                new LoadRunner.Result(1, 20, 5 * scale, 30 * scale, 100 * scale, "\uFFFD", List.of(200), null));
    }

    /** A single run of 100 ms and a layer-wise XpYd run of 1 s whose drop waited up to 1.7 s for P. */
    private static DemoReport layerWiseReport(double xpydWallMs) throws Exception {
        ObjectNode config = JSON.createObjectNode().put("prefill", 3).put("decode", 3).put("clients", 4);
        DemoReport.Run single = new DemoReport.Run("single", "none", false, 100, results(1), List.of(), 0.5);
        DemoReport.Run xpyd = new DemoReport.Run("xpyd-layerwise", "concurrent", true, xpydWallMs, results(10),
                List.of(instance("prefill-0", new double[] {20, 50}, new double[] {0, 0}, new double[] {0, 0}),
                        instance("decode-0", new double[] {0, 0}, new double[] {30, 80},
                                new double[] {200_000, 1_700_000})), 9.25);
        return new DemoReport(config, 0.5, single, List.of(xpyd));
    }

    private static String section(String html, String from, String to) {
        int a = html.indexOf(from);
        assertTrue(a >= 0, "no section " + from);
        return html.substring(a, to == null ? html.length() : html.indexOf(to, a));
    }

    private static final Pattern BAR = Pattern.compile("<rect x=\"230\" y=\"\\d+\" width=\"([0-9.]+)\"");

    @Test
    void theLayerChartShowsTheWaitForPApartFromTheCopyOnALogScaleWhereEveryBarIsVisible() throws Exception {
        DemoReport r = layerWiseReport(1000);
        String chart = section(r.html(), "Per-layer latency", "Timelines");

        assertTrue(chart.contains("xpyd-layerwise: insert (P)") && chart.contains("xpyd-layerwise: copy (D)")
                && chart.contains("xpyd-layerwise: waiting for P (D)"), chart);
        assertTrue(chart.contains("log scale"));
        List<Double> widths = new ArrayList<>();
        Matcher m = BAR.matcher(chart);
        while (m.find()) {
            widths.add(Double.parseDouble(m.group(1)));
        }
        assertEquals(6, widths.size(), chart);
        // On a linear axis to 1.7 s, a 20 µs bar would be 0.006 px wide.
        for (double w : widths) {
            assertTrue(w >= 20, "a bar " + w + " px wide: " + widths);
        }
        for (String tick : List.of(">10 µs<", ">100 µs<", ">1 ms<", ">100 ms<", ">10 s<")) {
            assertTrue(chart.contains(tick), "no tick " + tick);
        }
        assertTrue(chart.contains("p99 1.7 s") && chart.contains("p50 20 µs"), chart);
        assertEquals(1_700_000, r.json().at("/runs/1/drop_wait_us/p99").asDouble());
        assertEquals(80, r.json().at("/runs/1/drop_layer_us/p99").asDouble());
        assertTrue(r.text().contains("wait-for-P p50/99") && r.text().contains("200 ms/1.7 s"), r.text());
    }

    @Test
    void theTimelinesShareOneScaleWithTicks() throws Exception {
        String timelines = section(layerWiseReport(1000).html(), "Timelines", "Summary");
        String[] svgs = timelines.split("<svg ");
        assertEquals(3, svgs.length, "two timelines");
        double[] ends = new double[2];
        Pattern rect = Pattern.compile("<rect x=\"([0-9.]+)\" y=\"\\d+\" width=\"([0-9.]+)\" height=\"\\d+\" fill=\"#\\w+\"><title>request");
        for (int k = 0; k < 2; k++) {
            Matcher m = rect.matcher(svgs[k + 1]);
            while (m.find()) {
                ends[k] = Math.max(ends[k], Double.parseDouble(m.group(1)) + Double.parseDouble(m.group(2)));
            }
            for (String tick : List.of(">0 s<", ">0.2 s<", ">1 s<")) {
                assertTrue(svgs[k + 1].contains(tick), "timeline " + k + " has no tick " + tick);
            }
        }
        // The single run ends at 100 ms, the XpYd run at 1000 ms: one tenth of the width, on the same axis.
        double left = 10;
        assertEquals(0.1, (ends[0] - left) / (ends[1] - left), 0.01, java.util.Arrays.toString(ends));
        assertTrue(timelines.contains("the longest ends at 1 s"), timelines);
    }

    @Test
    void theWordingFollowsTheNumbersAndNamesTheLoadAndCores() throws Exception {
        DemoReport slower = layerWiseReport(1000);
        String text = slower.text();
        int cores = Runtime.getRuntime().availableProcessors();
        // TTFT p50 (nearest rank): 10 ms single, 100 ms XpYd; the run 0.1 s against 1.0 s.
        assertTrue(text.contains("time to first token p50 100 ms against 10 ms on the single engine, 900% more time"
                + " (slower); the whole run 1 s against 100 ms, 900% more time (slower) (in this one run, load"
                + " average 9.25 at its end, on " + cores + " cores)"), text);
        assertTrue(slower.html().contains("900% more time (slower)"));
        assertEquals(cores, slower.json().at("/machine/cpus").asInt());
        assertEquals(0.5, slower.json().at("/machine/load_average_1m_start").asDouble());
        assertTrue(slower.json().at("/machine/load_average_1m_end").isNumber());
        assertEquals(9.25, slower.json().at("/runs/1/load_average_1m_end").asDouble());
        assertTrue(slower.conditions().contains("measured once, on " + cores + " cores, at load average (1 min) 0.50"
                + " before the runs"), slower.conditions());
        assertEquals(cores < 6, slower.conditions().contains("with 6 engines on " + cores + " cores, the engines"
                + " competed for the CPU"), slower.conditions());

        assertTrue(layerWiseReport(50).text().contains("the whole run 50 ms against 100 ms, 50% less time (faster)"));
    }

    @Test
    void relativeDurationsSayLessOrMoreTime() {
        assertEquals("25% less time (faster)", ReportWording.relative(75, 100));
        assertEquals("50% more time (slower)", ReportWording.relative(150, 100));
        assertEquals("the same within 0.5%", ReportWording.relative(100.2, 100));
        assertEquals("not comparable (a zero duration)", ReportWording.relative(5, 0));
    }

    /**
     * An engine's {@code /kv/metrics} answer with its prompt tokens computed and, optionally, a tiered store's tiers;
     * a decode engine saved 5 new chunks of its decode KV.
     */
    private static ObjectNode engine(String name, long prefillTokens, String tiersJson) throws Exception {
        return (ObjectNode) JSON.readTree("{\"name\":\"" + name + "\",\"engine\":{\"requests\":2,\"loaded_prefills\":2,"
                + "\"prefill_tokens\":" + prefillTokens + ",\"prefix_cache\":{\"hit_tokens\":10},\"misses\":{}"
                + (name.startsWith("decode") ? ",\"decode_save\":{\"saves\":2,\"new_chunks\":5}" : "") + "},"
                + "\"connector\":{\"inserted_bytes\":1,\"dropped_bytes\":1}"
                + (tiersJson == null ? "" : ",\"store\":{\"uri\":\"t\",\"tiers\":" + tiersJson
                + ",\"write_back\":{\"depth\":0,\"dropped\":0}}") + "}");
    }

    private static DemoReport.Run policyRun(String name, String policy, long pTokens, long decodeOnly, double scale,
                                            String tiers) throws Exception {
        ObjectNode proxy = JSON.createObjectNode().put("decode_only", decodeOnly);
        if (policy.equals("kv-aware")) {
            proxy.putObject("kv_decisions").put("store_hit", 1).put("store_prefix", decodeOnly - 1);
            proxy.putObject("kv_predictions").put("exact", decodeOnly);
        }
        return new DemoReport.Run(name, "v1", false, 100, results(scale), List.of(engine("prefill-0", pTokens, tiers),
                engine("decode-0", 2, tiers)), 3.5, policy, "tiered:[shm:/a][valkey://h:6379]", proxy);
    }

    private static DemoReport multiTurn(long kvTokens) throws Exception {
        ObjectNode config = JSON.createObjectNode().put("prefill", 2).put("decode", 1).put("clients", 2)
                .put("workload", "multi-turn").put("kv_decode_max_suffix", 64);
        String two = "[{\"uri\":\"shm:/a\",\"hits\":8,\"bytes_read\":800,\"bytes_written\":900},"
                + "{\"uri\":\"valkey://h:6379\",\"hits\":0,\"bytes_read\":0,\"bytes_written\":900}]";
        String one = "[{\"uri\":\"valkey://h:6379\",\"hits\":8,\"bytes_read\":2048,\"bytes_written\":900}]";
        DemoReport.Run single = new DemoReport.Run("single", "none", false, 100, results(1),
                List.of(engine("single", 8, null)), 0.5);
        return new DemoReport(config, 0.5, single, List.of(policyRun("round-robin", "round-robin", 30, 0, 2, two),
                policyRun("kv-aware", "kv-aware", kvTokens, 4, 1, two),
                policyRun("kv-aware, last tier alone", "kv-aware", kvTokens, 4, 1.5, one)));
    }

    @Test
    void theComparisonCountsRecomputedTokensPrefixHitsAndOnlyTheRemoteTiersBytes() throws Exception {
        DemoReport r = multiTurn(10);
        var kv = r.json().at("/runs/2");
        // 40 prompt tokens sent; P computed 10 and D 2 of each side.
        assertEquals(40, kv.path("prompt_tokens").asLong());
        assertEquals(12, kv.path("prompt_tokens_recomputed").asLong());
        assertEquals(0.7, kv.path("prefix_hit_rate").asDouble(), "no engine computed 28 of the 40 prompt tokens");
        assertEquals(4, kv.path("decode_only").asLong());
        assertEquals(3, kv.path("decode_only_suffix").asLong(), "the proxy's store_prefix decisions");
        assertEquals(5, kv.path("decode_saved_chunks").asLong());
        assertTrue(r.json().at("/runs/1/decode_only_suffix").isMissingNode(), "round-robin has no kv decisions");
        assertEquals(20, kv.path("prefix_cache_hit_tokens").asLong());
        assertEquals(2, kv.path("store_tiers").size());
        assertEquals(1600, kv.at("/store_tiers/0/bytes_read").asLong(), "summed over both engines");
        assertEquals(0, kv.path("network_bytes_read").asLong(), "shm: is this host's memory");
        assertEquals(3600, kv.path("network_bytes_written").asLong() + kv.at("/store_tiers/0/bytes_written").asLong());
        assertEquals(4096, r.json().at("/runs/3/network_bytes_read").asLong());
        assertTrue(r.text().contains("network read"), r.text());
        assertTrue(r.html().contains("Policies and stores side by side"));
    }

    @Test
    void theComparisonIsWordedFromTheNumbersAgainstTheGoal() throws Exception {
        String met = String.join("\n", multiTurn(10).findings());
        assertTrue(met.contains("kv-aware recomputed 12 prompt tokens against 32 under round-robin: 63% fewer (the goal"
                + " is at least 50% fewer: met; the single engine, whose own prefix cache holds every earlier turn,"
                + " recomputed 8, so no routing could recompute more than 75% fewer)"), met);
        assertTrue(met.contains("with 4 decode-only requests (3 of them computing on D a suffix of at most 64 tokens"
                + " that the store lacked)"), met);
        assertTrue(met.contains("time to first token p50 10 ms against 20 ms, 50% less time (faster)"), met);
        assertTrue(met.contains("read 0.0 KiB over the network (written: 1.8 KiB) against 4.0 KiB"), met);
        String notMet = String.join("\n", multiTurn(40).findings());
        assertTrue(notMet.contains("42 prompt tokens against 32 under round-robin: 31% more (the goal is at least 50%"
                + " fewer: not met; the single engine"), notMet);
        assertFalse(String.join("\n", layerWiseReport(1000).findings()).contains("round-robin"),
                "no comparison outside the multi-turn workload");
    }

    @Test
    void onlyATieredStoreOfTwoTiersOrMoreRunsItsLastTierAlone() {
        assertEquals("tiered:[valkey://h:6379]", MultiTurn.lastTierAlone("tiered:[shm:/a?capacity=1GiB][valkey://h:6379]"));
        assertEquals("tiered:[valkey://h:2]", MultiTurn.lastTierAlone("tiered:[shm:/a][memory:][valkey://h:2]?write=back"));
        assertNull(MultiTurn.lastTierAlone("tiered:[valkey://h:6379]"));
        assertNull(MultiTurn.lastTierAlone("shm:/kvc-demo?capacity=1GiB"));
    }
}
