package dev.kvconnector.benchmarks.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayInputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;

class ReportMainTest {
    private static final double EPS = 1e-9;
    private static Path sample;
    private static List<BenchResult> results;
    private static List<LatencyTable.Row> rows;

    @BeforeAll
    static void readSample() throws Exception {
        sample = resource("jmh-sample.json");
        results = BenchResult.read(List.of(sample));
        rows = LatencyTable.build(results);
    }

    private static Path resource(String name) throws URISyntaxException {
        return Path.of(ReportMainTest.class.getClassLoader().getResource(name).toURI());
    }

    private static LatencyTable.Row row(String label, String model, int tokens) {
        return rows.stream().filter(r -> r.series().label().equals(label) && r.model().equals(model)
                && r.tokens() == tokens).findFirst().orElseThrow(() -> new AssertionError("no row " + label));
    }

    @Test
    void parsesMedianP99AllocationAndSampleCount() {
        BenchResult memcpy = results.getFirst();
        assertEquals("dev.kvconnector.benchmarks.MemcpyBaseline.copy", memcpy.benchmark());
        assertEquals(100.0, memcpy.p50Us(), EPS);
        assertEquals(200.0, memcpy.p99Us(), EPS);
        assertEquals(16.0, memcpy.allocBytesPerOp(), EPS);
        assertEquals(8, memcpy.samples());
        assertEquals("1 fork(s), warmup 1 x 500 ms, measurement 2 x 500 ms", memcpy.settings());
    }

    @Test
    void convertsNanosecondsToMicroseconds() {
        assertEquals(50.0, row("memcpy copy", "qwen2.5-0.5b", 1024).p50Us(), EPS);
    }

    @Test
    void rejectsThroughputUnits() throws Exception {
        var json = new ObjectMapper().readTree("[{\"benchmark\":\"a.B.c\",\"primaryMetric\":{\"score\":1,"
                + "\"scoreUnit\":\"ops/s\"}}]");
        assertThrows(IllegalArgumentException.class, () -> BenchResult.parse(json));
    }

    @Test
    void memoryStoreIsComparedWithMemcpyAndChronicle() {
        LatencyTable.Row put = row("memory: store put", "llama3-8b", 1024);
        assertEquals("memcpy copy", put.floor());
        assertEquals(1.5, put.floorRatio(), EPS);
        assertEquals(List.of(new LatencyTable.Ratio("chronicle-bytes copy", 1.2)), put.peers());
        assertEquals(4L << 20, put.layerBytes());
        assertEquals((4 << 20) / 150_000.0, put.gbPerSecond(), EPS);
    }

    @Test
    void valkeyStoreIsComparedWithTheMatchingSocketFloorAndWithLettuceAndJedis() {
        LatencyTable.Row put = row("valkey:// store put", "llama3-8b", 1024);
        assertEquals("socket send+ack", put.floor());
        assertEquals(1.5, put.floorRatio(), EPS);
        assertEquals(List.of(new LatencyTable.Ratio("jedis set", 0.75), new LatencyTable.Ratio("lettuce set", 0.6)),
                put.peers().stream().sorted((a, b) -> a.to().compareTo(b.to())).toList());
        LatencyTable.Row get = row("valkey:// store getInto", "llama3-8b", 1024);
        assertEquals("socket fetch", get.floor());
        assertEquals(2.0, get.floorRatio(), EPS);
        assertEquals(0.25, get.peers().stream().filter(p -> p.to().equals("lettuce get")).findFirst()
                .orElseThrow().ratio(), EPS);
    }

    @Test
    void peerLibrariesAreComparedWithTheSocketFloorOnly() {
        LatencyTable.Row lettuceGet = row("lettuce get", "llama3-8b", 1024);
        assertEquals("socket fetch", lettuceGet.floor());
        assertEquals(8.0, lettuceGet.floorRatio(), EPS);
        assertTrue(lettuceGet.peers().isEmpty());
        assertEquals(2.0, row("jedis set", "llama3-8b", 1024).floorRatio(), EPS);
    }

    @Test
    void connectorRequestsAreDividedByTheLayerCount() {
        LatencyTable.Row insert = row("memory: connector insert", "llama3-8b", 1024);
        assertEquals(6400.0 / 32, insert.p50Us(), EPS);
        assertEquals(9600.0 / 32, insert.p99Us(), EPS);
        assertEquals(100.0, insert.allocPerLayer(), EPS);
        assertEquals(2.0, insert.floorRatio(), EPS);
    }

    @Test
    void floorsHaveNoRatioAndComeFirstInEachShape() {
        LatencyTable.Row memcpy = row("memcpy copy", "llama3-8b", 1024);
        assertTrue(Double.isNaN(memcpy.floorRatio()));
        assertEquals("", memcpy.floor());
        List<LatencyTable.Row> llama1024 = rows.stream().filter(r -> r.model().equals("llama3-8b")
                && r.tokens() == 1024).toList();
        assertEquals(Series.Role.FLOOR, llama1024.getFirst().series().role());
        assertEquals("qwen2.5-0.5b", rows.getFirst().model(), "smallest model first");
    }

    @Test
    void markdownHasTheExpectedRowsAndGlanceTable() {
        ReportMain.Machine m = new ReportMain.Machine("Test CPU", 2, "Linux 6.1", "25.0.3", "3.10 2.00 1.00",
                "2.50 2.00 1.00");
        String md = ReportMain.markdown(rows, results, m, "quick", "2026-01-01T00:00:00Z");
        assertTrue(md.contains("| memory: store | put | 150.0 us | 300.0 us | 27.96 | 96 B | 1.50x memcpy copy "
                + "| 1.20x chronicle-bytes copy |"), md);
        assertTrue(md.contains("| memory: connector | insert (request / 32) | 200.0 us | 300.0 us | 20.97 | 100 B "
                + "| 2.00x memcpy copy | 1.60x chronicle-bytes copy |"), md);
        assertTrue(md.contains("| memcpy | copy | 100.0 us | 200.0 us | 41.94 | 16 B | floor |  |"), md);
        assertTrue(md.contains("## llama3-8b, 1024 tokens: 4.00 MiB per layer, 32 layers"), md);
        assertTrue(md.contains("3.10 2.00 1.00 at the start"), md);
        assertTrue(md.contains("| llama3-8b | 1024 | 1.25x |"), "glance row starts with chronicle's ratio\n" + md);
    }

    @Test
    void twoProcessShmHandOverIsComparedWithTwoMemcpys() {
        String pkg = "dev.kvconnector.benchmarks.";
        Map<String, String> shape = Map.of("model", "llama3-8b", "tokens", "1024");
        Map<String, String> shm = Map.of("model", "llama3-8b", "tokens", "1024", "shm", "shm:/kvc-xproc-{unique}");
        List<BenchResult> run = List.of(
                result(pkg + "MemcpyBaseline.copy", shape, 130),
                result(pkg + "ChronicleBytesBaseline.copy", shape, 140),
                result(pkg + "StoreLayerBenchmark.put", Map.of("model", "llama3-8b", "tokens", "1024", "store",
                        "shm:/kvc-bench-{unique}"), 195),
                result(pkg + "ShmCrossProcessBenchmark.twoCopies", shm, 260),
                result(pkg + "ShmCrossProcessBenchmark.putThenPeerDropSelect", shm, 364),
                result(pkg + "ShmCrossProcessBenchmark.handOff", shm, 15),
                result(pkg + "ShmCrossProcessBenchmark.putThenPeerDropSelectWokenByPipe", shm, 520),
                result(pkg + "ShmCrossProcessBenchmark.twoCopiesOnTwoCores", shm, 280),
                result(pkg + "ShmCrossProcessBenchmark.claimThenPeerViewSelect", shm, 312));
        List<LatencyTable.Row> table = LatencyTable.build(run);
        LatencyTable.Row handOver = only(table, "shm: 2 processes put+drop-select");
        assertEquals("memcpy 2 copies", handOver.floor());
        assertEquals(1.4, handOver.floorRatio(), EPS);
        assertEquals(List.of(new LatencyTable.Ratio("memcpy 2 copies on 2 cores", 1.3)), handOver.peers(),
                "the two-core floor, and not Chronicle's single copy, is the hand-over's second comparison");
        assertEquals("memcpy 2 copies", only(table, "memcpy 2 copies on 2 cores").floor());
        LatencyTable.Row claimView = only(table, "shm: 2 processes claim+view-select");
        assertEquals("memcpy 2 copies", claimView.floor());
        assertEquals(1.2, claimView.floorRatio(), EPS);
        LatencyTable.Row woken = only(table, "shm: 2 processes put+drop-select, peer woken by pipe");
        assertEquals("memcpy 2 copies", woken.floor());
        assertEquals(2.0, woken.floorRatio(), EPS);
        LatencyTable.Row put = only(table, "shm: store put");
        assertEquals("memcpy copy", put.floor());
        assertEquals(1.5, put.floorRatio(), EPS);
        assertEquals(Series.Role.FLOOR, only(table, "memcpy 2 copies").series().role());
        assertTrue(Double.isNaN(only(table, "pipe hand-off").floorRatio()));
        ReportMain.Machine m = new ReportMain.Machine("Test CPU", 2, "Linux 6.1", "25.0.3", "1 1 1", "1 1 1");
        String md = ReportMain.markdown(table, run, m, "quick", "2026-01-01T00:00:00Z");
        assertTrue(md.contains("| shm: 2 processes | put+drop-select | 364.0 us | 364.0 us | 11.52 | 0 B "
                + "| 1.40x memcpy 2 copies | 1.30x memcpy 2 copies on 2 cores |"), md);
        assertTrue(md.contains("| pipe | hand-off | 15.0 us | 15.0 us | n/a | 0 B | floor |  |"), md);
    }

    @Test
    void anInMemoryConnectorIsJudgedAgainstTheSameWorkingSetFloorWithTheHotFloorBeside() {
        String pkg = "dev.kvconnector.benchmarks.";
        Map<String, String> shape = Map.of("model", "llama3-8b", "tokens", "1024");
        Map<String, String> memory = Map.of("model", "llama3-8b", "tokens", "1024", "store", "memory:?capacity=2GiB",
                "source", "paged");
        List<BenchResult> run = List.of(
                result(pkg + "MemcpyBaseline.copy", shape, 300),
                result(pkg + "ChronicleBytesBaseline.copy", shape, 290),
                result(pkg + "ConnectorBenchmark.floorSameWorkingSet", shape, 32 * 500),
                result(pkg + "ConnectorBenchmark.floorHotLayer", shape, 320),
                result(pkg + "ConnectorBenchmark.sameWorkingSetInChunks", shape, 32 * 650),
                result(pkg + "ConnectorBenchmark.insert", memory, 32 * 640),
                result(pkg + "StoreLayerBenchmark.put", Map.of("model", "llama3-8b", "tokens", "1024", "store",
                        "memory:?capacity=2GiB"), 330));
        List<LatencyTable.Row> table = LatencyTable.build(run);

        LatencyTable.Row insert = only(table, "memory: connector paged insert");
        assertEquals(Series.SAME_WORKING_SET_FLOOR + " copy", insert.floor());
        assertEquals(640.0 / 500, insert.floorRatio(), EPS);
        assertEquals(List.of(new LatencyTable.Ratio(Series.HOT_FLOOR + " copy", 2.0)), insert.peers());
        LatencyTable.Row pieces = only(table, "memcpy request-sized in 64 KiB pieces copy");
        assertEquals(Series.SAME_WORKING_SET_FLOOR + " copy", pieces.floor(), "a labelled row, judged like a request");
        assertEquals(1.3, pieces.floorRatio(), EPS);
        LatencyTable.Row put = only(table, "memory: store put");
        assertEquals("memcpy copy", put.floor(), "a layer-level store keeps the layer's floor");
        assertEquals(1.1, put.floorRatio(), EPS);
        assertEquals(Series.Role.FLOOR, only(table, Series.HOT_FLOOR + " copy").series().role());
    }

    @Test
    void theMooncakeDoubleIsInProcessAndLmChunksAreOnTheNetwork() {
        String pkg = "dev.kvconnector.benchmarks.";
        Map<String, String> shape = Map.of("model", "llama3-8b", "tokens", "1024");
        String dbl = "mooncake://127.0.0.1:50779?metadata=P2PHANDSHAKE&library=/x/libmooncake_store_double.so";
        List<BenchResult> run = List.of(
                result(pkg + "MemcpyBaseline.copy", shape, 100),
                result(pkg + "SocketBaseline.sendWithAck", shape, 1000),
                result(pkg + "StoreLayerBenchmark.put", Map.of("model", "llama3-8b", "tokens", "1024", "store", dbl),
                        300),
                result(pkg + "StoreLayerBenchmark.put", Map.of("model", "llama3-8b", "tokens", "1024", "store",
                        "mooncake://10.0.0.1:50051?library=/opt/libmooncake_store.so"), 1500),
                result(pkg + "LmChunkBenchmark.put", shape, 32 * 1200));
        List<LatencyTable.Row> table = LatencyTable.build(run);
        LatencyTable.Row doubled = only(table, "mooncake:// double store put");
        assertEquals("memcpy copy", doubled.floor());
        assertEquals(3.0, doubled.floorRatio(), EPS);
        LatencyTable.Row real = only(table, "mooncake:// store put");
        assertEquals("socket send+ack", real.floor());
        assertEquals(1.5, real.floorRatio(), EPS);
        LatencyTable.Row chunks = only(table, "lm:// chunks put");
        assertEquals("socket send+ack", chunks.floor());
        assertEquals(1.2, chunks.floorRatio(), EPS);
    }

    private static BenchResult result(String benchmark, Map<String, String> params, double p50) {
        return new BenchResult(benchmark, params, p50, p50, 100, 0, "25", "1 fork(s)");
    }

    private static LatencyTable.Row only(List<LatencyTable.Row> table, String label) {
        List<LatencyTable.Row> found = table.stream().filter(r -> r.series().label().equals(label)).toList();
        assertEquals(1, found.size(), label + " in " + table);
        return found.getFirst();
    }

    @Test
    void chartIsWellFormedXmlWithALinePerSeriesThatHasSeveralPoints() throws Exception {
        String svg = LatencyChart.render(rows, "latency <quick> & more");
        var f = DocumentBuilderFactory.newInstance();
        f.setNamespaceAware(true);
        Document doc = f.newDocumentBuilder().parse(new ByteArrayInputStream(svg.getBytes(StandardCharsets.UTF_8)));
        assertEquals("svg", doc.getDocumentElement().getLocalName());
        assertEquals("http://www.w3.org/2000/svg", doc.getDocumentElement().getNamespaceURI());
        // memcpy copy and memory: store put have points at 1024 and 4096 tokens for llama3-8b.
        assertEquals(2, doc.getElementsByTagNameNS("*", "polyline").getLength());
        assertEquals(rows.size(), doc.getElementsByTagNameNS("*", "circle").getLength());
        assertTrue(doc.getDocumentElement().getTextContent().contains("latency <quick> & more"));
    }

    @Test
    void mainWritesReportChartAndMergedJson(@TempDir Path dir) throws Exception {
        Path merged = dir.resolve("jmh-quick.json");
        ReportMain.main(new String[] {"--out", dir.toString(), "--mode", "quick", "--merge-to", merged.toString(),
            sample.toString(), sample.toString()});
        assertEquals(2 * results.size(), new ObjectMapper().readTree(merged.toFile()).size());
        assertTrue(Files.readString(dir.resolve("REPORT.md")).startsWith("# Per-layer KV transfer latency (quick run)"));
        assertTrue(Files.readString(dir.resolve("latency.svg")).startsWith("<svg "));
    }

    @Test
    void theHandWrittenSectionsFromConnectorCoreOnSurviveARegeneratedReport() {
        String old = "# Report\n\n## llama3-8b\n\n| a |\n\n" + ReportMain.KEPT_SECTION + "\n\nbefore 1.6x\n\n"
                + "## Peer to peer\n\nkept too\n\n";
        String kept = ReportMain.keptSection(old);
        assertEquals("\n" + ReportMain.KEPT_SECTION + "\n\nbefore 1.6x\n\n## Peer to peer\n\nkept too\n", kept);
        assertEquals("", ReportMain.keptSection("# Report\n\n## llama3-8b\n"));
        assertTrue(ReportMain.keptSection("x\n" + ReportMain.KEPT_SECTION + "\n\nlast\n").endsWith("last\n"));
    }
}
