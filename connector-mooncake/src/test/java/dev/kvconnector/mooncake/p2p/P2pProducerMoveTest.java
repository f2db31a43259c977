package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.mooncake.te.TransferEngine;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A prefill that moves to another P while D waits (the proxy's concurrent flow retried it): D keeps the layers it
 * accepted from the first P, the second P writes only the others, and the first P's later messages are refused. The
 * two P's compute different bytes (seeds 3 and 5), so every layer tells which P wrote it.
 */
class P2pProducerMoveTest {
    private static final int TOKENS = 100;
    private static final long TIMEOUT_MS = 600;
    private static final long OLD = 3;
    private static final long NEW = 5;

    private TeTestTarget target;
    private PagedKVCache dCache;
    private PagedKVCache oldCache;
    private PagedKVCache newCache;
    private TransferEngineConnector d;
    private TransferEngineConnector oldP;
    private TransferEngineConnector newP;
    private final ConcurrentLinkedQueue<String> dErrors = new ConcurrentLinkedQueue<>();
    private final BlockTable dBlocks = P2pKv.table(20, 1, 7, TOKENS);
    private final BlockTable pBlocks = P2pKv.table(50, -6, 7, TOKENS);

    @BeforeEach
    void open() {
        target = TeTestTarget.require();
        dCache = P2pKv.untouchedCache();
        oldCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        newCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        P2pKv.compute(oldCache, pBlocks, OLD);
        P2pKv.compute(newCache, pBlocks, NEW);
        d = P2pKv.consumer(target.uri(), dCache, TIMEOUT_MS, dErrors);
        oldP = P2pKv.producer(target.uri());
        newP = P2pKv.producer(target.uri());
    }

    @AfterEach
    void close() {
        newP.close();
        oldP.close();
        d.close();
        dCache.close();
        newCache.close();
        oldCache.close();
    }

    private static RequestTokens request(String tid) {
        return P2pKv.request(tid, TOKENS);
    }

    /** D's drop-select of transfer {@code tid} into its cache. */
    private P2pDropSession drop(String tid) {
        return d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
    }

    /** The old P's insert of {@code tid} towards {@code drop}, its first {@code layers} layers put. */
    private InsertSession oldInsert(String tid, P2pDropSession drop, int layers) {
        InsertSession old = oldP.beginInsert(request(tid), drop.transferParams());
        for (int l = 0; l < layers; l++) {
            old.putLayer(l, oldCache, pBlocks);
        }
        return old;
    }

    private void insertAll(TransferEngineConnector p, PagedKVCache cache, String tid, KVTransferParams params) {
        P2pKv.insertAll(p, request(tid), params, cache, pBlocks, null);
    }

    private void assertLayersFrom(long seed, int from, int to) {
        for (int l = from; l < to; l++) {
            assertEquals(-1, P2pKv.firstMismatch(dCache, dBlocks, l, seed), "layer " + l + " is not P " + seed + "'s");
        }
    }

    @Test
    void aMovedTransferKeepsTheLayersDAcceptedAndTheNewProducerWritesOnlyTheOthers() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            InsertSession old = oldInsert(tid, drop, 2);
            assertTrue(drop.awaitLayer(0));
            assertTrue(drop.awaitLayer(1));

            int from = drop.moveProducer("the first P failed");

            assertEquals(2, from, "the next layer D awaits");
            waitFor(((P2pInsertSession) old)::isCancelled);
            insertAll(newP, newCache, tid, drop.transferParams(from));
            for (int l = 2; l < P2pKv.LAYOUT.numLayers(); l++) {
                assertTrue(drop.awaitLayer(l), "layer " + l);
            }
            DropResult r = drop.result();
            assertTrue(r.isComplete(), r::toString);
            old.close();
        }
        assertLayersFrom(OLD, 0, 2);
        assertLayersFrom(NEW, 2, P2pKv.LAYOUT.numLayers());
        assertEquals((P2pKv.LAYOUT.numLayers() - 2) * P2pKv.LAYOUT.layerBytes(TOKENS), newP.metrics().insertedBytes(),
                "the new P wrote the layers from 2 on, and nothing else");
        assertTrue(P2pKv.untouchedOutside(dCache, P2pKv.ids(dBlocks)));
    }

    @Test
    void layersTheOldProducerAnnouncedButDHasNotAcceptedAreWrittenAgainByTheNewOne() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            InsertSession old = oldInsert(tid, drop, 2);
            assertTrue(drop.awaitLayer(0));
            waitFor(() -> P2pKv.firstMismatch(dCache, dBlocks, 1, OLD) == -1);

            int from = drop.moveProducer("the first P failed");

            assertEquals(1, from, "layer 1 landed but D had not accepted it");
            insertAll(newP, newCache, tid, drop.transferParams(from));
            assertTrue(drop.result().isComplete(), drop.result()::toString);
            old.close();
        }
        assertLayersFrom(OLD, 0, 1);
        assertLayersFrom(NEW, 1, P2pKv.LAYOUT.numLayers());
    }

    @Test
    void aLateMessageFromTheProducerTheTransferMovedAwayFromIsRefusedAndTouchesNothing() throws Exception {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid);
             TransferEngine raw = target.open()) {
            InsertSession old = oldInsert(tid, drop, 1);
            assertTrue(drop.awaitLayer(0));
            int from = drop.moveProducer("the first P failed");
            var dSegment = raw.openSegment(d.engine().segmentName());
            String oldSender = oldP.engine().segmentName();

            // The old P's late layer 1 (a sum that would never match) and its abort, as if it wrote on after the move.
            raw.notify(dSegment, tid, P2pTestMessages.layer(oldSender, 1, P2pKv.LAYOUT.layerBytes(TOKENS), 12345));
            raw.notify(dSegment, tid, P2pMessage.abort(0, oldSender, "late"));
            waitFor(() -> d.staleNotifications() == 2);
            insertAll(newP, newCache, tid, drop.transferParams(from));

            DropResult r = drop.result();
            assertTrue(r.isComplete(), "the old P's late messages ended or spoiled the transfer: " + r);
            old.close();
        }
        assertTrue(dErrors.stream().anyMatch(s -> s.contains(tid) && s.contains("whose producer it is not")),
                dErrors::toString);
        assertLayersFrom(OLD, 0, 1);
        assertLayersFrom(NEW, 1, P2pKv.LAYOUT.numLayers());
    }

    @Test
    void aProducerThatHadSentNothingBeforeTheMoveIsRefusedAndToldToStopWhenItSpeaksLater() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            KVTransferParams first = drop.transferParams();

            int from = drop.moveProducer("the first P did not answer in time");

            assertEquals(0, from);
            assertEquals(1, P2pDestination.fromParams(drop.transferParams(from)).generation());
            // The first P, slow rather than dead, begins writing with the destination it was sent before the move.
            InsertSession old = oldP.beginInsert(request(tid), first);
            old.putLayer(0, oldCache, pBlocks);
            waitFor(((P2pInsertSession) old)::isCancelled);
            insertAll(newP, newCache, tid, drop.transferParams(from));

            DropResult r = drop.result();
            assertTrue(r.isComplete(), r::toString);
            old.close();
        }
        assertLayersFrom(NEW, 0, P2pKv.LAYOUT.numLayers());
        assertTrue(dErrors.stream().anyMatch(s -> s.contains(tid) && s.contains("of generation 0")
                && s.contains("told to stop")), dErrors::toString);
    }

    @Test
    void anAbortWhileTheProducerMayMoveWaitsForTheNextProducerInsteadOfMissing() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            drop.producerMayMove();
            InsertSession old = oldInsert(tid, drop, 1);
            old.abort();
            // Sent after the abort on the same connection: refused once the abort retired the old P.
            oldP.engine().notify(oldP.segment(d.engine().segmentName()), tid, P2pTestMessages.layer(
                    oldP.engine().segmentName(), 1, P2pKv.LAYOUT.layerBytes(TOKENS), 1));
            waitFor(() -> d.staleNotifications() == 1);
            assertTrue(drop.awaitLayer(0), "a layer that landed before the abort is whole");

            insertAll(newP, newCache, tid, drop.transferParams(drop.moveProducer("the first P failed")));

            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
        assertLayersFrom(OLD, 0, 1);
        assertLayersFrom(NEW, 1, P2pKv.LAYOUT.numLayers());
    }

    @Test
    void anAbortThatNoOtherProducerFollowsIsATimedOutMissNamingTheAbort() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            drop.producerMayMove();
            InsertSession old = oldInsert(tid, drop, 1);
            old.abort();

            DropResult r = drop.result();

            assertEquals(MissReason.TIMED_OUT, r.reason());
            assertTrue(r.detail().contains("aborted") && r.detail().contains("no other P took over"), r.detail());
        }
    }

    @Test
    void anAbandonedTransferIsAnAbsentMissAtOnceAndTheProducerStillWritingIsToldToStop() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            InsertSession old = oldInsert(tid, drop, 1);
            assertTrue(drop.awaitLayer(0));

            drop.abandon("every P failed");

            assertEquals(MissReason.ABSENT, drop.result().reason());
            assertTrue(drop.result().detail().contains("every P failed"), drop.result().detail());
            waitFor(((P2pInsertSession) old)::isCancelled);
            old.close();
        }
    }

    @Test
    void aTransferThatEndedHasNoProducerToMoveAndSaysWhichTransfer() {
        String tid = P2pKv.transferId();
        P2pDropSession drop = drop(tid);
        insertAll(oldP, oldCache, tid, drop.transferParams());
        waitFor(() -> d.lookup(request(tid)) == TOKENS);

        KVException committed = assertThrows(KVException.class, () -> drop.moveProducer("late retry"));
        assertTrue(drop.result().isComplete());
        KVException ended = assertThrows(KVException.class, () -> drop.moveProducer("late retry"));

        assertEquals(ErrorCode.CLOSED, committed.code());
        assertTrue(committed.getMessage().contains(tid) && committed.getMessage().contains("committed"),
                committed.getMessage());
        assertTrue(ended.getMessage().contains(tid) && ended.getMessage().contains("has ended"), ended.getMessage());
    }

    @Test
    void aFirstLayerOutsideTheLayoutIsRefusedBeforeAnythingIsWritten() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = drop(tid)) {
            KVException e = assertThrows(KVException.class, () -> newP.acceptDestination(
                    drop.transferParams(P2pKv.LAYOUT.numLayers() + 1)));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("kvc_from_layer") && e.getMessage().contains(tid), e.getMessage());
            assertEquals(2, P2pDestination.fromParams(drop.transferParams(2)).fromLayer());
            assertEquals(0, P2pDestination.fromParams(drop.transferParams()).fromLayer());
        }
        assertTrue(P2pKv.untouchedOutside(dCache));
    }

    private static void waitFor(BooleanSupplier done) {
        long end = System.nanoTime() + 5_000_000_000L;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("condition not met in 5 s");
            }
            LockSupport.parkNanos(5_000_000);
        }
    }
}
