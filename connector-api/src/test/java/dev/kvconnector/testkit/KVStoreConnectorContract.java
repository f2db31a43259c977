// Over 400 lines: the cases of one contract, each a specification that reads top to bottom, with the hooks and
// the flow they share; the request's bytes and their checks are in RequestKv.
package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What every {@link KVStoreConnector} promises, tested through the interface alone, so that any implementation runs
 * it: a {@code StoreConnector} over a store, a peer-to-peer connector, or one of your own. Extend it and implement
 * {@link #open}; override the other hooks where your connector needs them.
 *
 * <p>Every case moves KV in the order that both kinds of connector fit:
 * <ol>
 *   <li>the consumer begins its layer-wise drop-select ({@link KVStoreConnector#beginDropSelect}) into a host paged
 *       destination, the cache {@link #open} was given, at a shuffled block table;</li>
 *   <li>{@link #handOver} gives the producer what it needs from the consumer's drop-select (a peer-to-peer pair: D's
 *       {@code kv_transfer_params}; a store pair: nothing);</li>
 *   <li>the producer inserts layer by layer from its own paged cache and commits, while the consumer awaits each
 *       layer ({@link DropSession#awaitLayer}).</li>
 * </ol>
 * Requests are random tokens in a random namespace (when both connectors bind one), so a store on a long-running
 * server needs no cleaning. The consumer's layer timeout is given to {@link #open}: {@value #LAYER_TIMEOUT_MS} ms,
 * or {@value #SHORT_LAYER_TIMEOUT_MS} ms in the cases that wait for it to pass.
 *
 * <p>A case that only one kind of connector can run asks a capability ({@link #keepsCommittedEntries()}), never the
 * connector's class. A case that hangs fails after 60 s.
 */
@Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
public abstract class KVStoreConnectorContract {
    /** A small GQA layout: 4 layers, 2 KV heads of 16, bf16, 16-token blocks, hidden 32. */
    protected static final KVLayout MHA = new KVLayout("test-mha", AttentionKind.MHA, 4, 2, 16, DType.BF16, 16, 32);
    /** A small MLA layout: 3 layers, one 48-wide latent. */
    protected static final KVLayout MLA = new KVLayout("test-mla", AttentionKind.MLA, 3, 1, 48, DType.BF16, 16, 24);
    /** Blocks in the destination cache given to {@link #open} (and in each producer's cache). */
    protected static final int DESTINATION_BLOCKS = 64;
    /** The consumer's layer timeout in most cases, in ms. */
    protected static final long LAYER_TIMEOUT_MS = 3000;
    /** The consumer's layer timeout in the cases that wait for it to pass, in ms. */
    protected static final long SHORT_LAYER_TIMEOUT_MS = 1000;
    /** How much later than its layer timeout a consumer may report a miss on a loaded machine, in ms. */
    private static final long SLACK_MS = 2500;
    /** Tokens of most requests: 6 full blocks and a partial one. */
    private static final int TOKENS = 100;
    /** The layer the corrupt case damages. */
    private static final int DAMAGED_LAYER = 2;

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private final Random random = new Random();
    private ExecutorService producers;
    private Arena arena;
    /** The pair of the running case, from {@link #start}. */
    private Pair pair;
    /** The consumer's destination of the running case, from {@link #start}. */
    private PagedKVCache destination;
    private int[] freeBlocks;
    private int nextBlock;

    /**
     * The connectors of one case: the producer inserts, the consumer drop-selects; one connector may be both (a
     * store connector). {@code resources} (what the connectors use but do not own: a store, an engine) are closed
     * after both connectors, or null.
     */
    public record Pair(KVStoreConnector producer, KVStoreConnector consumer, AutoCloseable resources) {
        /** One connector that inserts and drop-selects. */
        public static Pair of(KVStoreConnector both) {
            return new Pair(both, both, null);
        }

        /** A producer and a consumer. */
        public static Pair of(KVStoreConnector producer, KVStoreConnector consumer) {
            return new Pair(producer, consumer, null);
        }

        /** This pair, with {@code after} closed after both connectors. */
        public Pair closing(AutoCloseable after) {
            return new Pair(producer, consumer, after);
        }
    }

    /**
     * Opens the connectors of one case. The suite closes them after the case (the producer first), then the pair's
     * resources, then {@code destination}.
     *
     * @param layout every transfer's layout
     * @param destination the host paged cache ({@value #DESTINATION_BLOCKS} blocks) the consumer drop-selects into
     *     (a peer-to-peer consumer registers it here)
     * @param layerTimeoutMillis how long the consumer's layer-wise drop-select waits for the producer, in ms, before
     *     a {@link MissReason#TIMED_OUT} miss
     */
    protected abstract Pair open(KVLayout layout, PagedKVCache destination, long layerTimeoutMillis);

    /**
     * Called after every {@code beginDropSelect} of the consumer and before the producer's {@code beginInsert}: gives
     * the producer what it needs from the consumer's drop-select. A peer-to-peer pair passes D's
     * {@code kv_transfer_params} to P; a store pair does nothing (the default).
     */
    protected void handOver(Pair pair, RequestTokens request, DropSession consumerSide) {
    }

    /**
     * Whether a committed insert stays for drop-selects that begin after the commit, and for {@code lookup}, as in a
     * store; false (the default) for a connector that moves a request only to a consumer already waiting for it
     * (peer to peer). The cases about later drop-selects and prefixes run only when it is true.
     */
    protected boolean keepsCommittedEntries() {
        return false;
    }

    /**
     * Damages at least one byte of layer {@code layer} of {@code request} where the consumer will read it, after the
     * producer committed: before the consumer's drop-select begins when {@link #keepsCommittedEntries()}, else
     * after it began and before the consumer awaits that layer (for a peer-to-peer pair, in the destination's
     * blocks at {@code destinationBlocks}). The default aborts the case: override it with
     * {@code Assumptions.abort(why)} where an implementation cannot be damaged from outside, saying why.
     */
    protected void corruptLayer(Pair pair, RequestTokens request, BlockTable destinationBlocks, int layer) {
        Assumptions.abort(getClass().getSimpleName() + " does not override corruptLayer, so the suite cannot damage "
                + "a layer of it from outside");
    }

    /**
     * For {@link #corruptLayer} of a connector that writes kvconnector's objects with the default key scheme into
     * {@code store}: flips the last byte of the first chunk's object of {@code layer}.
     */
    protected static void corruptStoredLayer(KVStore store, KVStoreConnector connector, RequestTokens request,
                                             int layer) {
        String key = KeySchemes.byName(KeySchemes.DEFAULT).plan(connector.keyContext(), request).chunks().getFirst()
                .layerKeys()[layer];
        try (Arena a = Arena.ofConfined()) {
            MemorySegment object = a.allocate(store.size(key));
            store.getInto(key, object);
            long last = object.byteSize() - 1;
            object.set(ValueLayout.JAVA_BYTE, last, (byte) ~object.get(ValueLayout.JAVA_BYTE, last));
            store.put(key, object, PutOptions.DEFAULT);
        }
    }

    @BeforeEach
    void prepare() {
        arena = Arena.ofShared();
        producers = Executors.newCachedThreadPool();
    }

    @AfterEach
    void closeAll() throws Exception {
        producers.shutdownNow();
        producers.awaitTermination(LAYER_TIMEOUT_MS + SLACK_MS, TimeUnit.MILLISECONDS);
        if (pair != null) {
            pair.producer().close();
            pair.consumer().close();
            if (pair.resources() != null) {
                pair.resources().close();
            }
        }
        for (AutoCloseable c : toClose) {
            c.close();
        }
        arena.close();
    }

    /** Opens the case's pair over a fresh destination whose every byte is {@link RequestKv#UNTOUCHED}. */
    private void start(KVLayout layout, long layerTimeoutMillis) {
        destination = PagedKVCache.allocate(layout, DESTINATION_BLOCKS);
        toClose.add(destination);
        RequestKv.fillUntouched(destination);
        pair = open(layout, destination, layerTimeoutMillis);
        freeBlocks = shuffledBlocks();
        nextBlock = 0;
    }

    private int[] shuffledBlocks() {
        int[] ids = new int[DESTINATION_BLOCKS];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i;
        }
        for (int i = ids.length - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = ids[i];
            ids[i] = ids[j];
            ids[j] = t;
        }
        return ids;
    }

    /** A new request of {@code tokens} random tokens and its KV, into destination blocks no other request has. */
    private RequestKv request(KVLayout layout, int tokens) {
        int[] t = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            t[i] = random.nextInt(128_000);
        }
        RequestTokens r = RequestTokens.of(t);
        if (pair.producer().bindsNamespace() && pair.consumer().bindsNamespace()) {
            r = r.inNamespace("contract-" + UUID.randomUUID());
        }
        int blocks = (tokens + layout.blockSize() - 1) / layout.blockSize();
        int[] dst = Arrays.copyOfRange(freeBlocks, nextBlock, nextBlock + blocks);
        nextBlock += blocks;
        int[] src = Arrays.copyOf(shuffledBlocks(), blocks);
        RequestKv kv = new RequestKv(layout, r, DESTINATION_BLOCKS, src, dst, carriesHidden(), arena,
                random.nextLong());
        toClose.add(kv);
        return kv;
    }

    private boolean carriesHidden() {
        return pair.producer().holdsHiddenStates() && pair.consumer().holdsHiddenStates();
    }

    /** Step 1 and 2: the consumer's layer-wise drop-select, then the hand-over. */
    private DropSession begin(RequestKv kv) {
        DropSession drop = pair.consumer().beginDropSelect(kv.request(), kv.target(destination));
        try {
            handOver(pair, kv.request(), drop);
        } catch (RuntimeException | Error e) {
            drop.close();
            throw e;
        }
        return drop;
    }

    /** Step 3 on another thread: every layer, the hidden states, the commit. */
    private Future<?> produce(RequestKv kv) {
        return producers.submit(() -> {
            try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
                kv.insertAll(insert);
            }
            return null;
        });
    }

    /** The consumer's side of step 3, as an engine runs it: each layer in order, stopping at the first miss. */
    private static int awaitEveryLayer(DropSession drop, KVLayout layout) {
        int l = 0;
        while (l < layout.numLayers() && drop.awaitLayer(l)) {
            l++;
        }
        return l;
    }

    private void assertLanded(RequestKv kv, KVLayout layout) {
        for (int l = 0; l < layout.numLayers(); l++) {
            assertNull(kv.firstMismatch(destination, l), "layer " + l + ": the first byte that differs");
        }
        assertTrue(kv.hiddenLanded(), "the hidden states differ");
    }

    private void moveEveryByte(KVLayout layout, int tokens) throws Exception {
        start(layout, LAYER_TIMEOUT_MS);
        RequestKv kv = request(layout, tokens);
        try (DropSession drop = begin(kv)) {
            Future<?> producer = produce(kv);
            assertEquals(layout.numLayers(), awaitEveryLayer(drop, layout), () -> "layers loaded; " + drop.result());
            producer.get();
            DropResult r = drop.result();
            assertTrue(r.isComplete(), r::toString);
            assertEquals(tokens, r.matchedTokens());
        }
        assertLanded(kv, layout);
        assertNull(RequestKv.firstChangeOutside(destination, kv), "a byte outside the request's slots changed");
    }

    @Test
    void everyByteOfEveryLayerAndTheHiddenStatesLandInTheConsumersBlocks() throws Exception {
        moveEveryByte(MHA, TOKENS);
    }

    @Test
    void anMlaLayoutMovesItsOneLatentPerLayer() throws Exception {
        moveEveryByte(MLA, 40);
    }

    @Test
    void awaitLayerZeroReturnsBeforeTheProducersLastPutLayer() throws Exception {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        int last = MHA.numLayers() - 1;
        // The producer holds its last layer back until the consumer has layer 0 (or 1 s passes, inside the layer
        // timeout): a drop-select that waited for the commit would see layer 0 only after the last putLayer, and
        // both checks below would fail.
        CountDownLatch consumerHasLayer0 = new CountDownLatch(1);
        AtomicBoolean lastPutBegan = new AtomicBoolean();
        try (DropSession drop = begin(kv)) {
            Future<Boolean> producer = producers.submit(() -> {
                try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
                    for (int l = 0; l < last; l++) {
                        kv.put(insert, l);
                    }
                    boolean heldBack = consumerHasLayer0.await(1, TimeUnit.SECONDS);
                    lastPutBegan.set(true);
                    kv.put(insert, last);
                    kv.putHidden(insert);
                    insert.commit();
                    return heldBack;
                }
            });
            assertTrue(drop.awaitLayer(0), () -> "layer 0: " + drop.result());
            boolean beforeLastPut = !lastPutBegan.get();
            consumerHasLayer0.countDown();
            for (int l = 1; l <= last; l++) {
                assertTrue(drop.awaitLayer(l), "layer " + l);
            }
            assertTrue(beforeLastPut, "awaitLayer(0) returned only after the producer's last putLayer began");
            assertTrue(producer.get(), "the producer waited 1 s for awaitLayer(0) to return before its last putLayer");
            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
        assertLanded(kv, MHA);
    }

    @Test
    void aWrongDtypeOrShapeIsRefusedBeforeAnythingIsWrittenAndTheDestinationIsUntouched() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (DropSession drop = begin(kv)) {
            try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
                Tensor fp32 = tensor(DType.FP32, TOKENS);
                assertRefused(ErrorCode.DTYPE_MISMATCH, () -> insert.putLayer(0, fp32, fp32));
                Tensor shorter = tensor(DType.BF16, TOKENS - 1);
                assertRefused(ErrorCode.SHAPE_MISMATCH, () -> insert.putLayer(0, shorter, shorter));
                Tensor ok = tensor(DType.BF16, TOKENS);
                assertRefused(ErrorCode.SHAPE_MISMATCH, () -> insert.putLayer(0, ok));
                assertRefused(ErrorCode.INVALID_ARGUMENT, () -> insert.putLayer(MHA.numLayers(), ok, ok));
            }
            DropResult r = drop.result();
            assertFalse(r.isHit(), r::toString);
        }
        assertNull(RequestKv.firstChangeOutside(destination), "a refused insert changed the destination");
        assertEquals(0, pair.consumer().lookup(kv.request()));
    }

    private Tensor tensor(DType dtype, int tokens) {
        TensorSpec spec = TensorSpec.of(dtype, tokens, MHA.kvHeads(), MHA.headSize());
        return Tensor.host(spec, arena.allocate(spec.byteSize()));
    }

    private static void assertRefused(ErrorCode code, Runnable put) {
        KVException e = assertThrows(KVException.class, put::run);
        assertEquals(code, e.code(), e.getMessage());
    }

    @Test
    void aProducerThatStopsIsATimedOutMissWithinTheLayerTimeoutNeverAHang() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        long begun = System.nanoTime();
        try (DropSession drop = begin(kv); InsertSession insert = pair.producer().beginInsert(kv.request())) {
            kv.put(insert, 0);
            kv.put(insert, 1);
            long stopped = System.nanoTime();
            assertTrue(drop.awaitLayer(0), () -> "layer 0: " + drop.result());
            assertTrue(drop.awaitLayer(1), () -> "layer 1: " + drop.result());
            assertFalse(drop.awaitLayer(2), "layer 2 was never put");
            long sinceStop = millisSince(stopped);
            long sinceBegin = millisSince(begun);
            DropResult r = drop.result();
            assertEquals(MissReason.TIMED_OUT, r.reason(), r::toString);
            assertTrue(sinceStop <= SHORT_LAYER_TIMEOUT_MS + SLACK_MS, "the miss came " + sinceStop
                    + " ms after the producer stopped, the layer timeout is " + SHORT_LAYER_TIMEOUT_MS + " ms");
            assertTrue(sinceBegin >= SHORT_LAYER_TIMEOUT_MS - 50, "timed out after " + sinceBegin + " ms, before "
                    + "the layer timeout of " + SHORT_LAYER_TIMEOUT_MS + " ms");
        }
        assertEquals(0, pair.consumer().lookup(kv.request()));
        assertEquals(1, pair.consumer().metrics().misses().get(MissReason.TIMED_OUT));
    }

    @Test
    void aDropSelectNoProducerEverAnswersIsATimedOutMissWithinTheLayerTimeout() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        long begun = System.nanoTime();
        try (DropSession drop = begin(kv)) {
            assertFalse(drop.awaitLayer(0));
            long waited = millisSince(begun);
            assertEquals(MissReason.TIMED_OUT, drop.result().reason(), drop.result()::toString);
            assertTrue(waited >= SHORT_LAYER_TIMEOUT_MS - 50 && waited <= SHORT_LAYER_TIMEOUT_MS + SLACK_MS,
                    waited + " ms for a layer timeout of " + SHORT_LAYER_TIMEOUT_MS + " ms");
        }
        assertNull(RequestKv.firstChangeOutside(destination), "nothing was inserted, yet the destination changed");
    }

    private static long millisSince(long nanos) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanos);
    }

    @Test
    void aProducerThatAbortsIsAMissWithItsReason() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (DropSession drop = begin(kv)) {
            try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
                kv.put(insert, 0);
                kv.put(insert, 1);
                assertTrue(drop.awaitLayer(0), () -> "layer 0: " + drop.result());
                insert.abort();
            }
            long aborted = System.nanoTime();
            assertFalse(drop.awaitLayer(MHA.numLayers() - 1), "the last layer was never put");
            DropResult r = drop.result();
            long waited = millisSince(aborted);
            assertFalse(r.isHit(), r::toString);
            assertNotNull(r.reason(), r::toString);
            assertTrue(r.detail() != null && !r.detail().isBlank(), "a miss without its reason: " + r);
            assertTrue(waited <= SHORT_LAYER_TIMEOUT_MS + SLACK_MS, "the miss came " + waited + " ms after the abort");
            assertEquals(1, pair.consumer().metrics().misses().get(r.reason()));
        }
        assertEquals(0, pair.consumer().lookup(kv.request()));
        assertEquals(1, pair.producer().metrics().aborts());
        assertEquals(0, pair.producer().metrics().commits());
        assertNull(RequestKv.firstChangeOutside(destination, kv), "a byte outside the request's slots changed");
    }

    @Test
    void commitWithALayerNeverPutFailsNamingTheLayerAndTheConsumerMisses() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (DropSession drop = begin(kv)) {
            try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
                kv.put(insert, 0);
                KVException e = assertThrows(KVException.class, insert::commit);
                assertTrue(e.getMessage().contains("layer 1"), e.getMessage());
            }
            DropResult r = drop.result();
            assertFalse(r.isHit(), r::toString);
            assertNotNull(r.reason(), r::toString);
        }
        assertEquals(0, pair.consumer().lookup(kv.request()));
    }

    @Test
    void twoRequestsAtOnceIntoDifferentBlocksEachGetTheirOwnBytes() throws Exception {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv first = request(MHA, TOKENS);
        RequestKv second = request(MHA, 70);
        try (DropSession a = begin(first); DropSession b = begin(second)) {
            Future<?> pa = produce(first);
            Future<?> pb = produce(second);
            for (int l = 0; l < MHA.numLayers(); l++) {
                assertTrue(a.awaitLayer(l), "first request, layer " + l);
                assertTrue(b.awaitLayer(l), "second request, layer " + l);
            }
            pa.get();
            pb.get();
            assertTrue(a.result().isComplete(), a.result()::toString);
            assertTrue(b.result().isComplete(), b.result()::toString);
        }
        assertLanded(first, MHA);
        assertLanded(second, MHA);
        assertNull(RequestKv.firstChangeOutside(destination, first, second), "a byte outside both requests changed");
    }

    @Test
    void transfersBegunEachInTheSessionsOfTheLastMoveEachRequestWhole() throws Exception {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv[] requests = {request(MHA, TOKENS), request(MHA, TOKENS), request(MHA, 70)};
        InsertSession lastInsert = null;
        DropSession lastDrop = null;
        for (RequestKv kv : requests) {
            DropSession drop = pair.consumer().beginDropSelect(kv.request(), kv.target(destination), lastDrop);
            try {
                handOver(pair, kv.request(), drop);
                InsertSession ended = lastInsert;
                Future<InsertSession> producer = producers.submit(() -> {
                    InsertSession insert = pair.producer().beginInsert(kv.request(), ended);
                    kv.insertAll(insert);
                    return insert;
                });
                assertTrue(drop.result().isComplete(), drop.result()::toString);
                lastInsert = producer.get();
            } finally {
                drop.close();
            }
            lastDrop = drop;
            assertLanded(kv, MHA);
        }
        assertNull(RequestKv.firstChangeOutside(destination, requests), "a byte outside the requests changed");
    }

    @Test
    void aCorruptLayerIsNeverAccepted() throws Exception {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        DropSession drop = null;
        try {
            if (!keepsCommittedEntries()) {
                drop = begin(kv);
            }
            produce(kv).get();
            corruptLayer(pair, kv.request(), kv.destinationBlocks(), DAMAGED_LAYER);
            if (drop == null) {
                drop = begin(kv);
            }
            for (int l = 0; l < DAMAGED_LAYER; l++) {
                assertTrue(drop.awaitLayer(l), "undamaged layer " + l);
            }
            assertFalse(drop.awaitLayer(DAMAGED_LAYER), "the damaged layer " + DAMAGED_LAYER + " was accepted");
            DropResult r = drop.result();
            assertEquals(MissReason.CORRUPT, r.reason(), r::toString);
            assertEquals(1, pair.consumer().metrics().misses().get(MissReason.CORRUPT));
        } finally {
            if (drop != null) {
                drop.close();
            }
        }
    }

    @Test
    void aDropSelectOfARequestNeverInsertedIsAnAbsentMissThatWritesNothing() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        assertEquals(0, pair.consumer().lookup(kv.request()));
        DropResult r = pair.consumer().dropSelect(kv.request(), kv.target(destination));
        assertEquals(MissReason.ABSENT, r.reason(), r::toString);
        assertEquals(0, r.matchedTokens());
        assertEquals(1, pair.consumer().metrics().misses().get(MissReason.ABSENT));
        assertNull(RequestKv.firstChangeOutside(destination), "a miss changed the destination");
    }

    @Test
    void lookupSeesNothingOfAnInsertBeforeItsCommit() {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        assertEquals(0, pair.consumer().lookup(kv.request()), "a request never inserted");
        try (DropSession drop = begin(kv); InsertSession insert = pair.producer().beginInsert(kv.request())) {
            for (int l = 0; l < MHA.numLayers(); l++) {
                kv.put(insert, l);
            }
            kv.putHidden(insert);
            assertEquals(MHA.numLayers(), awaitEveryLayer(drop, MHA), () -> "layers loaded; " + drop.result());
            assertEquals(0, pair.consumer().lookup(kv.request()), "every layer is in, but nothing is committed");
            insert.commit();
            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
    }

    /**
     * A connector that keeps nothing (peer to peer) holds a committed transfer only until its consumer ends it; a
     * store's lookup after the commit is {@link #aCommittedInsertIsDropSelectedWholeLaterAndLookupFindsItsLongestPrefix}
     * (here a consuming drop-select might remove the entry as soon as it is committed).
     */
    @Test
    void lookupSeesACommittedTransferUntilTheConsumerEndsIt() throws Exception {
        Assumptions.assumeFalse(keepsCommittedEntries(), "a store's lookup after a commit is checked where no "
                + "consuming drop-select runs: aCommittedInsertIsDropSelectedWholeLaterAndLookupFindsItsLongestPrefix");
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (DropSession drop = begin(kv)) {
            produce(kv).get();
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LAYER_TIMEOUT_MS);
            int seen;
            while ((seen = pair.consumer().lookup(kv.request())) != TOKENS && System.nanoTime() < deadline) {
                LockSupport.parkNanos(1_000_000);
            }
            assertEquals(TOKENS, seen, "the committed transfer's tokens, before the consumer's result()");
            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
        assertEquals(0, pair.consumer().lookup(kv.request()), "the consumer ended the transfer: nothing holds it");
    }

    @Test
    void metricsCountLayersBytesCommitsHitsAndMissesUntilReset() throws Exception {
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (DropSession drop = begin(kv)) {
            produce(kv).get();
            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
        assertEquals(MissReason.ABSENT, pair.consumer().dropSelect(request(MHA, TOKENS).request(),
                kv.target(destination)).reason());
        long kvBytes = MHA.numLayers() * MHA.layerBytes(TOKENS);
        ConnectorMetrics.Snapshot p = pair.producer().metrics();
        ConnectorMetrics.Snapshot d = pair.consumer().metrics();
        assertEquals(1, p.commits());
        assertTrue(p.insertLayer().count() >= MHA.numLayers(), p::toString);
        assertTrue(p.insertedBytes() >= kvBytes && p.insertedBytes() < 2 * kvBytes + (64 << 10), p::toString);
        assertEquals(1, d.hits());
        assertEquals(1, d.totalMisses());
        assertEquals(1, d.misses().get(MissReason.ABSENT));
        assertTrue(d.dropLayer().count() >= MHA.numLayers(), d::toString);
        assertTrue(d.droppedBytes() >= kvBytes && d.droppedBytes() < 2 * kvBytes + (64 << 10), d::toString);
        pair.producer().resetMetrics();
        pair.consumer().resetMetrics();
        for (ConnectorMetrics.Snapshot s : List.of(pair.producer().metrics(), pair.consumer().metrics())) {
            assertEquals(0, s.commits() + s.hits() + s.totalMisses() + s.insertedBytes() + s.droppedBytes()
                    + s.insertLayer().count() + s.dropLayer().count(), "after resetMetrics: " + s);
        }
    }

    @Test
    void closeEndsTransfersInFlightAndRefusesNewOnes() {
        start(MHA, SHORT_LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        DropSession drop = begin(kv);
        InsertSession insert = pair.producer().beginInsert(kv.request());
        kv.put(insert, 0);
        assertTrue(drop.awaitLayer(0), () -> "layer 0: " + drop.result());
        long closing = System.nanoTime();
        pair.producer().close();
        pair.consumer().close();
        long closed = millisSince(closing);
        DropResult r = drop.result();
        drop.close();
        assertTrue(closed <= SHORT_LAYER_TIMEOUT_MS + SLACK_MS, "close took " + closed + " ms");
        assertFalse(r.isHit(), "a transfer the producer never finished: " + r);
        for (KVStoreConnector c : List.of(pair.producer(), pair.consumer())) {
            RequestKv next = request(MHA, TOKENS);
            assertRefused(ErrorCode.CLOSED, () -> c.beginInsert(next.request()));
            assertRefused(ErrorCode.CLOSED, () -> c.beginDropSelect(next.request(), next.target(destination)));
            c.close();
        }
        insert.close();
    }

    @Test
    void aCommittedInsertIsDropSelectedWholeLaterAndLookupFindsItsLongestPrefix() {
        Assumptions.assumeTrue(keepsCommittedEntries(), "this connector keeps nothing after a transfer, so nothing "
                + "is there for a drop-select that begins after the commit");
        start(MHA, LAYER_TIMEOUT_MS);
        RequestKv kv = request(MHA, TOKENS);
        try (InsertSession insert = pair.producer().beginInsert(kv.request())) {
            kv.insertAll(insert);
        }
        assertEquals(TOKENS, pair.consumer().lookup(kv.request()));
        int chunk = pair.consumer().keyContext().chunkTokens();
        int at = chunk < TOKENS ? (chunk + TOKENS) / 2 : TOKENS / 2;
        int[] changed = kv.request().tokens();
        changed[at] ^= 1;
        RequestTokens other = RequestTokens.of(changed);
        if (kv.request().namespace() != null) {
            other = other.inNamespace(kv.request().namespace());
        }
        assertEquals(at / chunk * chunk, pair.consumer().lookup(other), "the longest committed prefix in chunks of "
                + chunk + " tokens, with token " + at + " changed");
        DropResult r = pair.consumer().dropSelect(kv.request(), kv.target(destination));
        assertTrue(r.isComplete(), r::toString);
        assertLanded(kv, MHA);
        assertNull(RequestKv.firstChangeOutside(destination, kv), "a byte outside the request's slots changed");
    }
}
