package dev.kvconnector.connector.multi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Two store connectors as one: inserts reach both, loads come from the first that holds the whole request. */
class MultiConnectorTest {
    private static final KVLayout LAYOUT = new KVLayout("test-mha", AttentionKind.MHA, 4, 2, 16, DType.BF16, 16, 32);
    private static final int TOKENS = 64;

    private PagedKVCache source;
    private PagedKVCache dest;
    private final BlockTable blocks = new BlockTable(IntStream.range(0, 4).toArray(), 16, TOKENS);
    private final BlockTable destBlocks = new BlockTable(IntStream.range(6, 10).toArray(), 16, TOKENS);
    private final List<KVStoreConnector> opened = new ArrayList<>();

    @BeforeEach
    void open() {
        source = PagedKVCache.allocate(LAYOUT, 12);
        dest = PagedKVCache.allocate(LAYOUT, 12);
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                Segments.fill(source.tensor(l, t), l * 10L + t);
            }
        }
    }

    @AfterEach
    void close() {
        opened.forEach(KVStoreConnector::close);
        source.close();
        dest.close();
    }

    private KVStoreConnector store(DropMode mode) {
        KVStoreConnector c = KVStoreConnector.builder("memory:?capacity=64MiB", LAYOUT).modelId("m").chunkTokens(32)
                .dropMode(mode).stagingBytes(8L << 20).build();
        opened.add(c);
        return c;
    }

    private MultiConnector multi(KVStoreConnector... cs) {
        MultiConnector m = MultiConnector.of(List.of(cs));
        opened.removeAll(List.of(cs));
        opened.add(m);
        return m;
    }

    private static RequestTokens request() {
        return RequestTokens.of(IntStream.range(500, 500 + TOKENS).toArray()).inNamespace("t-1");
    }

    private void insert(KVStoreConnector c) {
        try (InsertSession s = c.beginInsert(request())) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                s.putLayer(l, source, blocks);
            }
            s.commit();
        }
    }

    private boolean destHoldsSource() {
        try (Arena a = Arena.ofConfined()) {
            long bytes = TOKENS * LAYOUT.bytesPerTokenPerTensor();
            MemorySegment want = a.allocate(bytes);
            MemorySegment got = a.allocate(bytes);
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    source.gather(l, t, blocks, 0, TOKENS, want, 0);
                    dest.gather(l, t, destBlocks, 0, TOKENS, got, 0);
                    if (!Segments.equal(want, got, bytes)) {
                        return false;
                    }
                }
            }
            return true;
        }
    }

    @Test
    void anInsertReachesEveryConnectorAndALoadComesFromTheFirstThatHoldsTheWholeRequest() {
        KVStoreConnector inFlight = store(DropMode.CONSUME);
        KVStoreConnector prefix = store(DropMode.RETAIN);
        MultiConnector m = multi(inFlight, prefix);
        insert(m);
        assertEquals(TOKENS, inFlight.lookup(request()));
        assertEquals(TOKENS, prefix.lookup(request()));
        assertSame(inFlight, m.loadFrom(request()));
        assertTrue(m.dropSelect(request(), DropTarget.paged(dest, destBlocks)).isComplete());
        assertTrue(destHoldsSource());
        assertEquals(0, inFlight.lookup(request()), "the in-flight path consumed it");
        assertSame(prefix, m.loadFrom(request()), "the prefix store still holds it");
        dest.tensor(0, 0).fill((byte) 0);
        DropResult again = m.dropSelect(request(), DropTarget.paged(dest, destBlocks));
        assertTrue(again.isComplete(), again::toString);
        assertTrue(destHoldsSource());
        assertEquals(2, m.metrics().commits());
        assertEquals(2, m.metrics().hits());
    }

    @Test
    void aRequestNoConnectorHoldsIsTheFirstConnectorsMiss() {
        KVStoreConnector first = store(DropMode.CONSUME);
        MultiConnector m = multi(first, store(DropMode.RETAIN));
        assertSame(first, m.loadFrom(request()));
        DropResult r = m.dropSelect(request(), DropTarget.paged(dest, destBlocks));
        assertFalse(r.isHit());
        assertEquals(0, m.lookup(request()));
    }

    @Test
    void connectorsOfDifferentLayoutsAreRefused() {
        KVStoreConnector other = KVStoreConnector.builder("memory:", LAYOUT.withDtype(DType.FP16)).modelId("m").build();
        opened.add(other);
        KVException e = assertThrows(KVException.class, () -> MultiConnector.of(List.of(store(DropMode.CONSUME),
                other)));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("share a layout"), e.getMessage());
    }

    @Test
    void theCompositionIsChosenByKvTransferConfigInVllmsForm() {
        KvTransferConfig config = KvTransferConfig.fromJson("""
                {"kv_connector": "MultiConnector", "kv_role": "kv_both",
                 "kv_connector_extra_config": {"connectors": [
                   {"kv_connector": "A", "kv_role": "kv_both"},
                   {"kv_connector": "B", "kv_role": "kv_both", "kv_connector_extra_config": {"mode": "retain"}}]}}
                """);
        List<String> built = new ArrayList<>();
        MultiConnector m = MultiConnector.fromConfig(config, c -> {
            built.add(c.kvConnector() + ":" + c.extraConfig("mode", "consume"));
            KVStoreConnector s = store("retain".equals(c.extraConfig("mode", "consume")) ? DropMode.RETAIN
                    : DropMode.CONSUME);
            opened.remove(s);
            return s;
        });
        opened.add(m);
        assertEquals(List.of("A:consume", "B:retain"), built);
        assertEquals(2, m.connectors().size());

        KVException missing = assertThrows(KVException.class, () -> MultiConnector.fromConfig(KvTransferConfig
                .fromJson("{\"kv_connector\": \"MultiConnector\", \"kv_role\": \"kv_both\"}"), c -> null));
        assertEquals(ErrorCode.INVALID_CONFIG, missing.code());
        assertTrue(missing.getMessage().contains("connectors"), missing.getMessage());
    }

    @Test
    void aConnectorThatFailsToBuildClosesThoseBuiltBefore() {
        List<KVStoreConnector> made = new ArrayList<>();
        KvTransferConfig config = KvTransferConfig.fromJson("""
                {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [
                   {"kv_connector": "A", "kv_role": "kv_both"}, {"kv_connector": "broken", "kv_role": "kv_both"}]}}
                """);
        KVException e = assertThrows(KVException.class, () -> MultiConnector.fromConfig(config, c -> {
            if (c.kvConnector().equals("broken")) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "no such connector: broken").build();
            }
            KVStoreConnector s = store(DropMode.CONSUME);
            made.add(s);
            return s;
        }));
        assertTrue(e.getMessage().contains("broken"));
        KVException closed = assertThrows(KVException.class, () -> made.getFirst().lookup(request()));
        assertEquals(ErrorCode.CLOSED, closed.code(), closed.getMessage());
        opened.removeAll(made);
    }
}
