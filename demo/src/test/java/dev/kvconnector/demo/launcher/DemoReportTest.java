package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The report's verdict and numbers, from hand-made results (no processes). */
class DemoReportTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static LoadRunner.Result result(int i, String text, List<Integer> ids, String error) {
        return new LoadRunner.Result(i, 20, 10.0 * i, 10.0 * i + 5, 10.0 * i + 9, text, ids, error);
    }

    private static DemoReport report(List<LoadRunner.Result> xpyd) {
        DemoReport.Run single = new DemoReport.Run("single", "none", false, 30,
                List.of(result(0, "ab", List.of(97, 98), null), result(1, "\uFFFD", List.of(200), null)), List.of());
        return new DemoReport(JSON.createObjectNode(), single,
                List.of(new DemoReport.Run("xpyd", "v1", false, 30, xpyd, List.of())));
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
}
