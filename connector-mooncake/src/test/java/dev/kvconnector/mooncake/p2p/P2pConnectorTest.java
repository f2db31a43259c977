package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.mooncake.te.TransferEngine;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * P and D as two connectors with two engines in this JVM (their bytes still cross the engine's transport), for the
 * failures and the bad input: each is an error or a miss that names its cause, and D's cache is never changed by
 * what D refuses. What every connector promises (every byte, a wrong dtype or shape, a producer that stops or
 * aborts, two requests at once, a damaged layer, lookup, metrics, close) is {@link P2pKVStoreConnectorContractTest};
 * the two-process flows are {@link P2pTwoProcessTest}.
 */
class P2pConnectorTest {
    private static final int TOKENS = 100;
    private static final long TIMEOUT_MS = 600;

    private TeTestTarget target;
    private PagedKVCache dCache;
    private PagedKVCache pCache;
    private TransferEngineConnector d;
    private TransferEngineConnector p;
    private Arena arena;
    private final ConcurrentLinkedQueue<String> dErrors = new ConcurrentLinkedQueue<>();
    private final BlockTable dBlocks = P2pKv.table(20, 1, 7, TOKENS);
    private final BlockTable pBlocks = P2pKv.table(50, -6, 7, TOKENS);

    @BeforeEach
    void open() {
        target = TeTestTarget.require();
        dCache = P2pKv.untouchedCache();
        pCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        P2pKv.compute(pCache, pBlocks, 3);
        d = P2pKv.consumer(target.uri(), dCache, TIMEOUT_MS, dErrors);
        p = P2pKv.producer(target.uri());
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        p.close();
        d.close();
        dCache.close();
        pCache.close();
        arena.close();
    }

    private static RequestTokens request(String tid) {
        return P2pKv.request(tid, TOKENS);
    }

    private void insertAll(String tid, KVTransferParams params, Tensor hidden) {
        P2pKv.insertAll(p, request(tid), params, pCache, pBlocks, hidden);
    }

    private void assertDCacheUntouched() {
        assertTrue(P2pKv.untouchedOutside(dCache), "D's cache is unchanged");
    }

    @Test
    void wholeRequestDropSelectWaitsForTheTransferBegunAndReturnsEveryByte() {
        String tid = P2pKv.transferId();
        Tensor hidden = P2pKv.hidden(arena, TOKENS, 0);
        DropTarget t = DropTarget.paged(dCache, dBlocks).withHidden(hidden);
        P2pDropSession drop = d.beginDropSelect(request(tid), t);
        insertAll(tid, drop.transferParams(), P2pKv.hidden(arena, TOKENS, 3));
        DropResult r = d.dropSelect(request(tid), t);
        assertTrue(r.isComplete(), r::toString);
        for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
            assertEquals(-1, P2pKv.firstMismatch(dCache, dBlocks, l, 3), "layer " + l);
        }
        assertTrue(Segments.equal(P2pKv.hidden(arena, TOKENS, 3).segment(), hidden.segment(),
                hidden.spec().byteSize()));
        assertTrue(P2pKv.untouchedOutside(dCache, P2pKv.ids(dBlocks)));
        assertEquals(P2pKv.LAYOUT.numLayers() * P2pKv.LAYOUT.layerBytes(TOKENS), p.metrics().insertedBytes());
        assertEquals(1, p.metrics().commits());
        assertTrue(dErrors.isEmpty(), dErrors::toString);
    }

    @Test
    void paramsCarryVllmFieldNamesAndReadBackToTheSameDestination() {
        P2pDropSession drop = d.beginDropSelect(request("t-names"), DropTarget.paged(dCache, dBlocks));
        KVTransferParams params = KVTransferParams.fromJson(drop.transferParams().toJson());
        String segment = d.engine().segmentName();
        assertEquals(segment, params.remoteHost() + ":" + params.remotePort());
        assertEquals(d.engineId(), params.remoteEngineId());
        assertEquals("t-names", params.transferId());
        assertEquals(List.of(20, 21, 22, 23, 24, 25, 26), params.remoteBlockIds());
        P2pDestination back = P2pDestination.fromParams(params);
        assertEquals(segment, back.segment());
        assertEquals(TOKENS, back.tokens());
        assertEquals(dCache.tensor(3, 1).address(), back.cacheAddrs()[7]);
        drop.close();
    }

    @Test
    void dsDeadlineWithNoProducerIsATimedOutMissNamingTheTransferAndLayer() {
        String tid = P2pKv.transferId();
        long start = System.nanoTime();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks))) {
            assertFalse(drop.awaitLayer(0));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms >= TIMEOUT_MS - 50 && ms < TIMEOUT_MS + 2000, ms + " ms");
            DropResult r = drop.result();
            assertEquals(MissReason.TIMED_OUT, r.reason());
            assertTrue(r.detail().contains(tid) && r.detail().contains("no layer 0"), r.detail());
        }
        assertEquals(0, d.lookup(request(tid)));
        assertEquals(1, d.metrics().misses().get(MissReason.TIMED_OUT));
    }

    @Test
    void unreachablePeerFailsTheInsertNamingItsHostAndPort() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        P2pDropSession drop = d.beginDropSelect(request("t-gone"), DropTarget.paged(dCache, dBlocks));
        KVTransferParams params = drop.transferParams().toBuilder().remotePort(port).build();
        KVException e = assertThrows(KVException.class, () -> p.beginInsert(request("t-gone"), params));
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("127.0.0.1:" + port) || e.getMessage().contains(":" + port),
                e.getMessage());
        drop.close();
    }

    @Test
    void aMissingRegistrationIsAnErrorOnEitherSide() {
        try (PagedKVCache unregistered = P2pKv.untouchedCache()) {
            KVException dSide = assertThrows(KVException.class, () -> d.beginDropSelect(request("t-unreg"),
                    DropTarget.paged(unregistered, dBlocks)));
            assertEquals(ErrorCode.UNSUPPORTED, dSide.code());
            assertTrue(dSide.getMessage().contains("not registered"), dSide.getMessage());
        }
        KVException pSide = assertThrows(KVException.class, () -> p.beginInsert(request("t-none")));
        assertEquals(ErrorCode.INVALID_ARGUMENT, pSide.code());
        assertTrue(pSide.getMessage().contains("no destination for transfer t-none"), pSide.getMessage());
    }

    @Test
    void destinationAddressesOutsideDsRegistrationFailPsCommitAndDMissesWithoutAChangedByte() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks))) {
            com.fasterxml.jackson.databind.node.ArrayNode addrs = JsonNodeFactory.instance.arrayNode();
            long elsewhere = arena.allocate(1 << 20, 4096).address();
            for (int i = 0; i < P2pKv.LAYOUT.numLayers() * P2pKv.LAYOUT.tensorsPerLayer(); i++) {
                addrs.add(elsewhere);
            }
            KVTransferParams forged = drop.transferParams().toBuilder()
                    .unknownField(P2pDestination.CACHE_ADDRS, addrs).build();
            InsertSession insert = p.beginInsert(request(tid), forged);
            for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                insert.putLayer(l, pCache, pBlocks);
            }
            KVException e = assertThrows(KVException.class, insert::commit);
            assertEquals(ErrorCode.IO_ERROR, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("ended FAILED") && e.getMessage().contains(d.engine().segmentName()),
                    e.getMessage());
            DropResult r = drop.result();
            assertFalse(r.isHit(), r::toString);
            assertTrue(r.reason() == MissReason.CORRUPT || r.reason() == MissReason.ABSENT, r::toString);
            insert.close();
        }
        assertDCacheUntouched();
    }

    @Test
    void blockIdsOutsideDsCacheAreRefusedBeforeAnythingIsWritten() {
        P2pDropSession drop = d.beginDropSelect(request("t-range"), DropTarget.paged(dCache, dBlocks));
        KVTransferParams bad = drop.transferParams().toBuilder()
                .remoteBlockIds(List.of(20, 21, 22, 23, 24, 25, P2pKv.CACHE_BLOCKS)).build();
        KVException e = assertThrows(KVException.class, () -> p.acceptDestination(bad));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("block id 64") && e.getMessage().contains("64 blocks"), e.getMessage());
        drop.close();
        assertDCacheUntouched();
    }

    @Test
    void aProducerOfAnotherLayoutOrTokenCountIsRefused() {
        P2pDropSession drop = d.beginDropSelect(request("t-layout"), DropTarget.paged(dCache, dBlocks));
        KVLayout other = P2pKv.LAYOUT.withDtype(DType.FP16);
        try (TransferEngineConnector fp16 = TransferEngineConnector.builder(p.engine(), other).build()) {
            KVException e = assertThrows(KVException.class, () -> fp16.acceptDestination(drop.transferParams()));
            assertEquals(ErrorCode.INVALID_CONFIG, e.code());
            assertTrue(e.getMessage().contains(other.fingerprintHex()), e.getMessage());
        }
        p.acceptDestination(drop.transferParams());
        KVException e = assertThrows(KVException.class, () -> p.beginInsert(RequestTokens.of(new int[TOKENS + 1])
                .inNamespace("t-layout")));
        assertEquals(ErrorCode.SHAPE_MISMATCH, e.code());
        assertTrue(e.getMessage().contains("D expects 100 tokens"), e.getMessage());
        drop.close();
        assertDCacheUntouched();
    }

    @Test
    void anAnnouncedLengthThatDoesNotMatchTheLayoutIsACorruptMissNamingBoth() throws Exception {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
             TransferEngine raw = target.open()) {
            raw.notify(raw.openSegment(d.engine().segmentName()), tid,
                    P2pTestMessages.layer(raw.segmentName(), 0, 4096, 0));
            assertFalse(drop.awaitLayer(0));
            DropResult r = drop.result();
            assertEquals(MissReason.CORRUPT, r.reason());
            assertTrue(r.detail().contains("4096 bytes") && r.detail().contains(
                    Long.toString(P2pKv.LAYOUT.layerBytes(TOKENS))), r.detail());
            assertTrue(dErrors.stream().anyMatch(s -> s.contains("PROTOCOL_ERROR") || s.contains("4096 bytes")),
                    dErrors::toString);
        }
        assertDCacheUntouched();
    }

    @Test
    void aLayerWhoseBytesDoNotMatchPsWordSumIsNeverAccepted() throws Exception {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
             TransferEngine raw = target.open()) {
            raw.notify(raw.openSegment(d.engine().segmentName()), tid,
                    P2pTestMessages.layer(raw.segmentName(), 0, P2pKv.LAYOUT.layerBytes(TOKENS), 12345));
            assertFalse(drop.awaitLayer(0), "announced but never written: a half-written layer");
            DropResult r = drop.result();
            assertEquals(MissReason.CORRUPT, r.reason());
            assertTrue(r.detail().contains("word sum") && r.detail().contains("layer 0"), r.detail());
        }
    }

    @Test
    void aMissHoldsDsBlocksUntilPsLastMessageAndTellsPToStop() throws Exception {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
             TransferEngine raw = target.open()) {
            var dSegment = raw.openSegment(d.engine().segmentName());
            raw.notify(dSegment, tid, P2pTestMessages.layer(raw.segmentName(), 0, P2pKv.LAYOUT.layerBytes(TOKENS), 7));
            assertFalse(drop.awaitLayer(0));
            long start = System.nanoTime();
            Thread.ofPlatform().start(() -> {
                java.util.concurrent.locks.LockSupport.parkNanos(300_000_000L);
                raw.notify(dSegment, tid, P2pMessage.abort(0, raw.segmentName(), "stopped as D asked"));
            });
            DropResult r = drop.result();
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals(MissReason.CORRUPT, r.reason());
            assertTrue(ms >= 250 && ms < TIMEOUT_MS + 1000, "result() returned after P's abort, " + ms + " ms");
            List<dev.kvconnector.mooncake.te.Notification> told = new java.util.ArrayList<>();
            waitFor(() -> {
                told.addAll(raw.notifications());
                return !told.isEmpty();
            });
            assertEquals(tid, told.getFirst().name());
            assertEquals(P2pMessage.Kind.CANCEL, P2pMessage.parse(told.getFirst().message()).kind());
        }
    }

    @Test
    void aProducerAnsweringForATransferDNoLongerWaitsForIsIgnoredAndReported() throws Exception {
        String tid = P2pKv.transferId();
        P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
        assertEquals(MissReason.TIMED_OUT, drop.result().reason());
        try (TransferEngine raw = target.open()) {
            raw.notify(raw.openSegment(d.engine().segmentName()), tid,
                    P2pTestMessages.layer(raw.segmentName(), 0, P2pKv.LAYOUT.layerBytes(TOKENS), 1));
            waitFor(() -> d.staleNotifications() == 1);
        }
        assertTrue(dErrors.stream().anyMatch(s -> s.contains(tid) && s.contains("no longer waits")),
                dErrors::toString);
        assertEquals(0, d.lookup(request(tid)));
        assertEquals(MissReason.ABSENT, d.dropSelect(request(tid), DropTarget.paged(dCache, dBlocks)).reason(),
                "an ended transfer is nothing to wait for");
        assertDCacheUntouched();
    }

    @Test
    void aNotificationForAnUnknownRequestIsIgnoredAndReported() throws Exception {
        try (TransferEngine raw = target.open()) {
            raw.notify(raw.openSegment(d.engine().segmentName()), "never-begun", P2pMessage.commit(0, raw.segmentName(),
                    4));
            raw.notify(raw.openSegment(d.engine().segmentName()), "junk", "hello");
            waitFor(() -> d.unknownNotifications() == 2);
        }
        assertTrue(dErrors.stream().anyMatch(s -> s.contains("unknown transfer never-begun")), dErrors::toString);
        assertTrue(dErrors.stream().anyMatch(s -> s.contains("not a kvc-p2p/1 message")), dErrors::toString);
        assertDCacheUntouched();
    }

    @Test
    void commitWithAMissingLayerAbortsNamesTheLayerAndDMisses() {
        String tid = P2pKv.transferId();
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks))) {
            InsertSession insert = p.beginInsert(request(tid), drop.transferParams());
            insert.putLayer(0, pCache, pBlocks);
            KVException e = assertThrows(KVException.class, insert::commit);
            assertTrue(e.getMessage().contains("layer 1 was never put"), e.getMessage());
            assertFalse(drop.awaitLayer(1));
            assertEquals(MissReason.ABSENT, drop.result().reason());
            assertTrue(drop.result().detail().contains("P aborted: layer 1 was never put"), drop.result().detail());
        }
    }

    @Test
    void dsStopReachesPWhoseCommitThenFailsNamingIt() {
        String tid = P2pKv.transferId();
        P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(dCache, dBlocks));
        try (InsertSession insert = p.beginInsert(request(tid), drop.transferParams())) {
            insert.putLayer(0, pCache, pBlocks);
            assertTrue(drop.awaitLayer(0));
            assertEquals(MissReason.TIMED_OUT, drop.result().reason(), "P stalls past D's timeout");
            waitFor(((P2pInsertSession) insert)::isCancelled);
            for (int l = 1; l < P2pKv.LAYOUT.numLayers(); l++) {
                insert.putLayer(l, pCache, pBlocks);
            }
            KVException e = assertThrows(KVException.class, insert::commit);
            assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("stopped waiting"), e.getMessage());
        }
        assertTrue(P2pKv.untouched(dCache, dBlocks, 1), "nothing written after D's stop");
    }

    @Test
    void aRequestWithoutATransferIdIsRefusedAndAnUnbegunDropSelectIsAnAbsentMiss() {
        KVException e = assertThrows(KVException.class, () -> d.beginDropSelect(RequestTokens.of(1, 2, 3),
                DropTarget.paged(dCache, dBlocks)));
        assertTrue(e.getMessage().contains("transfer id"), e.getMessage());
        DropResult r = d.dropSelect(request("t-never"), DropTarget.paged(dCache, dBlocks));
        assertEquals(MissReason.ABSENT, r.reason());
        assertTrue(r.detail().contains("beginDropSelect"), r.detail());
    }

    private static void waitFor(java.util.function.BooleanSupplier done) {
        long end = System.nanoTime() + 5_000_000_000L;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("condition not met in 5 s");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
        }
    }
}
