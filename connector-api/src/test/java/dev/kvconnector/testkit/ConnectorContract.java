package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.SlotMapping;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour of {@link KVStoreConnector} over any store. A backend proves the connector works over it by
 * extending this class and implementing {@link #openStore()}. Every test uses a fresh namespace, so stores
 * backed by a long-running server need no cleaning.
 */
public abstract class ConnectorContract {
    /** A small GQA layout: 4 layers, 2 KV heads of 16, bf16, 16-token blocks, hidden 32. */
    protected static final KVLayout MHA = new KVLayout("test-mha", AttentionKind.MHA, 4, 2, 16, DType.BF16, 16, 32);
    /** A small MLA layout: 3 layers, one 48-wide latent. */
    protected static final KVLayout MLA = new KVLayout("test-mla", AttentionKind.MLA, 3, 1, 48, DType.BF16, 16, 24);
    private static final int CHUNK = 32;

    /** The store under test. */
    protected KVStore store;
    /** Memory freed after each test. */
    protected Arena arena;
    private final List<KVStoreConnector> connectors = new ArrayList<>();
    private String namespace;

    /** Opens a new store for one test. */
    protected abstract KVStore openStore();

    @BeforeEach
    void open() {
        arena = Arena.ofShared();
        store = openStore();
        namespace = UUID.randomUUID().toString();
    }

    @AfterEach
    void close() {
        connectors.forEach(KVStoreConnector::close);
        store.close();
        arena.close();
    }

    /** A connector over the test's store with 32-token chunks and a 2 s layer timeout. */
    protected KVStoreConnector connector(KVLayout layout, DropMode mode) {
        KVStoreConnector c = KVStoreConnector.builder(store, layout).modelId("test/model").chunkTokens(CHUNK)
                .dropMode(mode).layerTimeoutMillis(2000).stagingBytes(256L << 20).build();
        connectors.add(c);
        return c;
    }

    /** A request of {@code n} tokens starting from {@code seed}, in this test's namespace. */
    protected RequestTokens request(int n, int seed) {
        int[] t = new int[n];
        Random r = new Random(seed);
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(128_000);
        }
        return RequestTokens.of(t).inNamespace(namespace);
    }

    private Tensor[][] randomLayers(KVLayout layout, int tokens, long seed) {
        Tensor[][] out = new Tensor[layout.numLayers()][layout.tensorsPerLayer()];
        TensorSpec spec = TensorSpec.of(layout.dtype(), tokens, layout.kvHeads(), layout.headSize());
        for (int l = 0; l < out.length; l++) {
            for (int t = 0; t < out[l].length; t++) {
                out[l][t] = Tensor.host(spec, Segments.random(arena, spec.byteSize(), seed * 1000 + l * 10 + t));
            }
        }
        return out;
    }

    private Tensor[][] emptyLayers(KVLayout layout, int tokens) {
        Tensor[][] out = new Tensor[layout.numLayers()][layout.tensorsPerLayer()];
        TensorSpec spec = TensorSpec.of(layout.dtype(), tokens, layout.kvHeads(), layout.headSize());
        for (Tensor[] layer : out) {
            for (int t = 0; t < layer.length; t++) {
                layer[t] = Tensor.host(spec, arena.allocate(spec.byteSize()));
            }
        }
        return out;
    }

    private Tensor hidden(KVLayout layout, int tokens, long seed) {
        TensorSpec spec = TensorSpec.of(DType.FP32, tokens, layout.hiddenSize());
        return Tensor.host(spec, seed == 0 ? arena.allocate(spec.byteSize()) : Segments.random(arena, spec.byteSize(), seed));
    }

    private void insertAll(KVStoreConnector c, RequestTokens req, Tensor[][] layers, Tensor hidden) {
        try (InsertSession s = c.beginInsert(req)) {
            for (int l = 0; l < layers.length; l++) {
                s.putLayer(l, layers[l]);
            }
            if (hidden != null) {
                s.putHidden(hidden);
            }
            s.commit();
        }
    }

    private static void assertSameLayers(Tensor[][] want, Tensor[][] got, long bytes) {
        for (int l = 0; l < want.length; l++) {
            for (int t = 0; t < want[l].length; t++) {
                assertTrue(Segments.equal(want[l][t].segment(), got[l][t].segment(), bytes), "layer " + l + " tensor " + t);
            }
        }
    }

    @Test
    void insertCommitThenDropSelectReturnsEveryByte() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(100, 1);
        Tensor[][] layers = randomLayers(MHA, 100, 1);
        Tensor h = hidden(MHA, 100, 77);
        insertAll(c, req, layers, h);
        assertEquals(100, c.lookup(req));
        Tensor[][] got = emptyLayers(MHA, 100);
        Tensor gotHidden = hidden(MHA, 100, 0);
        DropResult r = c.dropSelect(req, DropTarget.contiguous(got).withHidden(gotHidden));
        assertTrue(r.isComplete(), r.toString());
        assertSameLayers(layers, got, 100 * MHA.bytesPerTokenPerTensor());
        assertTrue(Segments.equal(h.segment(), gotHidden.segment(), h.spec().byteSize()));
    }

    @Test
    void mlaLayoutRoundTripsOneLatentPerLayer() {
        KVStoreConnector c = connector(MLA, DropMode.CONSUME);
        RequestTokens req = request(40, 2);
        Tensor[][] layers = randomLayers(MLA, 40, 2);
        insertAll(c, req, layers, null);
        Tensor[][] got = emptyLayers(MLA, 40);
        assertTrue(c.dropSelect(req, DropTarget.contiguous(got)).isComplete());
        assertSameLayers(layers, got, 40 * MLA.bytesPerTokenPerTensor());
    }

    @Test
    void pagedGatherOnInsertAndScatterOnDropMoveTheSameTokens() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        int tokens = 70;
        try (PagedKVCache producer = PagedKVCache.allocate(MHA, 16); PagedKVCache consumer = PagedKVCache.allocate(MHA, 16)) {
            for (int l = 0; l < MHA.numLayers(); l++) {
                for (int t = 0; t < 2; t++) {
                    Segments.fill(producer.tensor(l, t), l * 7L + t);
                }
            }
            BlockTable pBlocks = new BlockTable(new int[] {9, 2, 14, 5, 0}, 16, tokens);
            long[] slots = new long[tokens];
            for (int i = 0; i < tokens; i++) {
                slots[i] = (long) (15 - i / 16) * 16 + i % 16;
            }
            SlotMapping dSlots = new SlotMapping(slots);
            RequestTokens req = request(tokens, 3);
            try (InsertSession s = c.beginInsert(req)) {
                for (int l = 0; l < MHA.numLayers(); l++) {
                    s.putLayer(l, producer, pBlocks);
                }
                s.commit();
            }
            assertTrue(c.dropSelect(req, DropTarget.paged(consumer, dSlots)).isComplete());
            long tb = MHA.bytesPerTokenPerTensor();
            for (int l = 0; l < MHA.numLayers(); l++) {
                for (int t = 0; t < 2; t++) {
                    for (int i = 0; i < tokens; i++) {
                        assertEquals(-1, MemorySegment.mismatch(producer.tensor(l, t), pBlocks.slot(i) * tb,
                                pBlocks.slot(i) * tb + tb, consumer.tensor(l, t), slots[i] * tb, slots[i] * tb + tb),
                                "layer " + l + " tensor " + t + " token " + i);
                    }
                }
            }
        }
    }

    @Test
    void dropSelectReturnsAbsentMissWhenEntryNeverCommitted() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(50, 4);
        Tensor[][] layers = randomLayers(MHA, 50, 4);
        InsertSession s = c.beginInsert(req);
        for (int l = 0; l < layers.length; l++) {
            s.putLayer(l, layers[l]);
        }
        DropResult r = c.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 50)));
        assertEquals(MissReason.ABSENT, r.reason());
        assertFalse(r.isHit());
        s.abort();
        assertEquals(1, c.metrics().misses().get(MissReason.ABSENT));
    }

    @Test
    void abortRemovesEveryObjectWritten() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(80, 5);
        Tensor[][] layers = randomLayers(MHA, 80, 5);
        try (InsertSession s = c.beginInsert(req)) {
            s.putLayer(0, layers[0]);
            s.putLayer(1, layers[1]);
            s.putHidden(hidden(MHA, 80, 5));
            s.abort();
        }
        assertEquals(0, c.lookup(req));
        for (String k : allKeys(c, req)) {
            assertFalse(store.exists(k), k + " survived the abort");
        }
    }

    @Test
    void commitWithAMissingLayerAbortsAndNamesTheLayer() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(20, 6);
        Tensor[][] layers = randomLayers(MHA, 20, 6);
        InsertSession s = c.beginInsert(req);
        s.putLayer(0, layers[0]);
        KVException e = assertThrows(KVException.class, s::commit);
        assertTrue(e.getMessage().contains("layer 1"), e.getMessage());
        assertEquals(0, c.lookup(req));
    }

    @Test
    void consumeRemovesTheEntryAndRetainKeepsIt() {
        KVStoreConnector retain = connector(MHA, DropMode.RETAIN);
        RequestTokens req = request(64, 7);
        insertAll(retain, req, randomLayers(MHA, 64, 7), null);
        assertTrue(retain.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 64))).isComplete());
        assertTrue(retain.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 64))).isComplete());
        assertTrue(retain.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 64)), DropMode.CONSUME).isComplete());
        DropResult again = retain.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 64)));
        assertEquals(MissReason.ABSENT, again.reason());
        for (String k : allKeys(retain, req)) {
            assertFalse(store.exists(k), k + " survived consumption");
        }
    }

    @Test
    void lookupAndDropSelectReturnTheLongestCommittedPrefixInWholeChunks() {
        KVStoreConnector c = connector(MHA, DropMode.RETAIN);
        RequestTokens first = request(100, 8);
        Tensor[][] layers = randomLayers(MHA, 100, 8);
        insertAll(c, first, layers, null);
        int[] t = first.tokens();
        t[70] ^= 1;
        RequestTokens second = RequestTokens.of(t).inNamespace(first.namespace());
        assertEquals(64, c.lookup(second));
        Tensor[][] got = emptyLayers(MHA, 100);
        DropResult r = c.dropSelect(second, DropTarget.contiguous(got));
        assertTrue(r.isHit());
        assertFalse(r.isComplete());
        assertEquals(64, r.matchedTokens());
        assertSameLayers(layers, got, 64 * MHA.bytesPerTokenPerTensor());
    }

    @Test
    void layerWiseDropSelectLoadsLayersWhileTheProducerIsStillWriting() throws Exception {
        KVStoreConnector p = connector(MHA, DropMode.CONSUME);
        KVStoreConnector d = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(90, 9);
        Tensor[][] layers = randomLayers(MHA, 90, 9);
        Tensor h = hidden(MHA, 90, 9);
        Tensor[][] got = emptyLayers(MHA, 90);
        Tensor gotHidden = hidden(MHA, 90, 0);
        int last = layers.length - 1;
        // The producer holds its last layer back until the consumer has layer 0 (or 1 s passes, inside the
        // consumer's 2 s layer timeout): a drop-select that waited for the commit would see layer 0 only after
        // the last putLayer, and both checks below would fail.
        CountDownLatch consumerHasLayer0 = new CountDownLatch(1);
        AtomicBoolean lastPutStarted = new AtomicBoolean();
        try (DropSession drop = d.beginDropSelect(req, DropTarget.contiguous(got).withHidden(gotHidden))) {
            ExecutorService producer = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> f = producer.submit(() -> {
                    boolean heldBack;
                    try (InsertSession s = p.beginInsert(req)) {
                        for (int l = 0; l < last; l++) {
                            s.putLayer(l, layers[l]);
                        }
                        heldBack = consumerHasLayer0.await(1, TimeUnit.SECONDS);
                        lastPutStarted.set(true);
                        s.putLayer(last, layers[last]);
                        s.putHidden(h);
                        s.commit();
                    }
                    return heldBack;
                });
                assertTrue(drop.awaitLayer(0), "layer 0");
                boolean beforeLastPut = !lastPutStarted.get();
                consumerHasLayer0.countDown();
                for (int l = 1; l < MHA.numLayers(); l++) {
                    assertTrue(drop.awaitLayer(l), "layer " + l);
                }
                assertTrue(beforeLastPut, "awaitLayer(0) returned only after the producer's last putLayer began");
                assertTrue(f.get(), "the producer waited 1 s for awaitLayer(0) to return before its last putLayer");
            } finally {
                producer.shutdownNow();
            }
            DropResult r = drop.result();
            assertTrue(r.isComplete(), r.toString());
        }
        assertSameLayers(layers, got, 90 * MHA.bytesPerTokenPerTensor());
        assertTrue(Segments.equal(h.segment(), gotHidden.segment(), h.spec().byteSize()));
        assertEquals(0, d.lookup(req), "consumed entry is still visible");
    }

    @Test
    void layerWiseDropSelectTimesOutWhenTheProducerStops() {
        KVStoreConnector p = connector(MHA, DropMode.CONSUME);
        KVStoreConnector d = KVStoreConnector.builder(store, MHA).modelId("test/model").chunkTokens(CHUNK)
                .layerTimeoutMillis(300).build();
        connectors.add(d);
        RequestTokens req = request(40, 10);
        Tensor[][] layers = randomLayers(MHA, 40, 10);
        InsertSession s = p.beginInsert(req);
        s.putLayer(0, layers[0]);
        s.putLayer(1, layers[1]);
        try (DropSession drop = d.beginDropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 40)))) {
            assertTrue(drop.awaitLayer(1));
            assertFalse(drop.awaitLayer(2));
            assertEquals(MissReason.TIMED_OUT, drop.result().reason());
        }
        s.abort();
    }

    @Test
    void corruptPayloadIsACorruptMissNotGarbage() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(32, 11);
        insertAll(c, req, randomLayers(MHA, 32, 11), null);
        String key = plan(c, req).chunks().getFirst().layerKeys()[2];
        long size = store.size(key);
        MemorySegment obj = arena.allocate(size);
        store.getInto(key, obj);
        obj.set(ValueLayout.JAVA_BYTE, size - 1, (byte) (obj.get(ValueLayout.JAVA_BYTE, size - 1) ^ 0x40));
        store.put(key, obj, PutOptions.DEFAULT);
        DropResult r = c.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 32)));
        assertEquals(MissReason.CORRUPT, r.reason(), r.toString());
        assertTrue(r.detail().contains(key.substring(0, 10)), r.detail());
    }

    @Test
    void truncatedObjectIsAMissWithAReason() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(32, 12);
        insertAll(c, req, randomLayers(MHA, 32, 12), null);
        String key = plan(c, req).chunks().getFirst().layerKeys()[0];
        MemorySegment obj = arena.allocate(store.size(key));
        store.getInto(key, obj);
        store.put(key, obj.asSlice(0, obj.byteSize() - 100), PutOptions.DEFAULT);
        DropResult r = c.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 32)));
        assertEquals(MissReason.CORRUPT, r.reason(), r.toString());
        assertEquals(0, r.matchedTokens());
    }

    @Test
    void objectOfAnotherLayoutIsALayoutMismatchMiss() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(32, 13);
        insertAll(c, req, randomLayers(MHA, 32, 13), null);
        String key = plan(c, req).chunks().getFirst().layerKeys()[1];
        MemorySegment obj = arena.allocate(store.size(key));
        store.getInto(key, obj);
        KVLayout other = MHA.withDtype(DType.FP16);
        try (KVStoreConnector writer = KVStoreConnector.builder(store, other).modelId("other").chunkTokens(CHUNK).build()) {
            RequestTokens otherReq = request(32, 13);
            Tensor[][] otherLayers = randomLayers(other, 32, 13);
            insertAll(writer, otherReq, otherLayers, null);
            String otherKey = KeySchemes.byName(KeySchemes.DEFAULT).plan(writer.keyContext(), otherReq).chunks()
                    .getFirst().layerKeys()[1];
            MemorySegment foreign = arena.allocate(store.size(otherKey));
            store.getInto(otherKey, foreign);
            store.put(key, foreign, PutOptions.DEFAULT);
        }
        DropResult r = c.dropSelect(req, DropTarget.contiguous(emptyLayers(MHA, 32)));
        assertEquals(MissReason.LAYOUT_MISMATCH, r.reason(), r.toString());
    }

    @Test
    void wrongDtypeOrShapeIsRejectedBeforeAnythingIsStored() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(16, 14);
        try (InsertSession s = c.beginInsert(req)) {
            Tensor fp32 = Tensor.host(TensorSpec.of(DType.FP32, 16, 2, 16), arena.allocate(16 * 2 * 16 * 4));
            assertEquals(ErrorCode.DTYPE_MISMATCH, assertThrows(KVException.class, () -> s.putLayer(0, fp32, fp32)).code());
            Tensor shortT = Tensor.host(TensorSpec.of(DType.BF16, 15, 2, 16), arena.allocate(15 * 2 * 16 * 2));
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class, () -> s.putLayer(0, shortT, shortT)).code());
            Tensor ok = Tensor.host(TensorSpec.of(DType.BF16, 16, 2, 16), arena.allocate(16 * 2 * 16 * 2));
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class, () -> s.putLayer(0, ok)).code());
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> s.putLayer(4, ok, ok)).code());
        }
        assertEquals(0, c.lookup(req));
    }

    @Test
    void concurrentRequestsEachGetTheirOwnBytes() throws Exception {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                int id = i;
                fs.add(pool.submit(() -> {
                    int n = 20 + id * 13;
                    RequestTokens req = request(n, 100 + id);
                    Tensor[][] layers = randomLayers(MHA, n, 100 + id);
                    insertAll(c, req, layers, null);
                    Tensor[][] got = emptyLayers(MHA, n);
                    DropResult r = c.dropSelect(req, DropTarget.contiguous(got));
                    assertTrue(r.isComplete(), r.toString());
                    assertSameLayers(layers, got, n * MHA.bytesPerTokenPerTensor());
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(8, c.metrics().hits());
        assertEquals(8, c.metrics().commits());
        assertTrue(c.metrics().insertLayer().count() >= 8L * MHA.numLayers());
    }

    @Test
    void aStoreThatFillsUpFailsTheCommitAndLeavesNothingVisible() {
        KVStoreConnector c = connector(MHA, DropMode.CONSUME);
        RequestTokens req = request(4000, 15);
        long requestBytes = 4000L * MHA.bytesPerTokenPerLayer() * MHA.numLayers();
        long free = freeBytes();
        org.junit.jupiter.api.Assumptions.assumeTrue(free > 0 && free < requestBytes,
                "this store cannot be filled by one request (free bytes " + free + ")");
        Tensor[][] layers = randomLayers(MHA, 4000, 15);
        InsertSession s = c.beginInsert(req);
        KVException e = assertThrows(KVException.class, () -> {
            for (int l = 0; l < layers.length; l++) {
                s.putLayer(l, layers[l]);
            }
            s.commit();
        });
        assertEquals(ErrorCode.STORE_FULL, e.code(), e.getMessage());
        s.abort();
        assertEquals(0, c.lookup(req));
        for (String k : allKeys(c, req)) {
            assertFalse(store.exists(k), k + " survived the failed insert");
        }
    }

    /**
     * Bytes this test's store can still take before it refuses a put, or 0 when it cannot be filled (it evicts, or
     * is too large to fill in a test). Stores that refuse when full override this to run the store-full test.
     */
    protected long freeBytes() {
        return 0;
    }

    private KeyPlan plan(KVStoreConnector c, RequestTokens req) {
        return KeySchemes.byName(KeySchemes.DEFAULT).plan(c.keyContext(), req);
    }

    private List<String> allKeys(KVStoreConnector c, RequestTokens req) {
        List<String> keys = new ArrayList<>();
        for (ChunkKeys ck : plan(c, req).chunks()) {
            keys.add(ck.manifestKey());
            keys.add(ck.hiddenKey());
            keys.addAll(List.of(ck.layerKeys()));
        }
        return keys;
    }
}
