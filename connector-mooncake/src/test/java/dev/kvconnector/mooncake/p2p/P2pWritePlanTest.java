package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.SlotMapping;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * How P plans a layer's WRITEs: one per tensor and run of D's blocks that are consecutive in token order, however
 * P's own blocks lie; a plan that does not fit a batch, or D's slots that are not whole blocks, are refused before
 * anything is written; any number of layers in flight delivers every byte; and a put allocates nothing once warm.
 */
class P2pWritePlanTest {
    private static final int TOKENS = 100;
    private static final int BLOCKS = 7;

    private TeTestTarget target;
    private PagedKVCache dCache;
    private PagedKVCache pCache;
    private TransferEngineConnector d;
    private final BlockTable pBlocks = P2pKv.table(50, -6, BLOCKS, TOKENS);

    @BeforeEach
    void open() {
        target = TeTestTarget.require();
        dCache = P2pKv.untouchedCache();
        pCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        P2pKv.compute(pCache, pBlocks, 5);
        d = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT).registerCache(dCache).layerTimeoutMillis(600)
                .stagingBytes(1L << 20).build();
    }

    @AfterEach
    void close() {
        d.close();
        dCache.close();
        pCache.close();
    }

    /** Moves the request from P's shuffled blocks into {@code dBlocks}; returns P's WRITE requests. */
    private long transfer(TransferEngineConnector p, String tid, BlockTable dBlocks) {
        RequestTokens request = RequestTokens.of(new int[TOKENS]).inNamespace(tid);
        try (P2pDropSession drop = d.beginDropSelect(request, DropTarget.paged(dCache, dBlocks))) {
            long before = p.metrics.writeRequests();
            try (InsertSession insert = p.beginInsert(request, drop.transferParams())) {
                for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                    insert.putLayer(l, pCache, pBlocks);
                }
                insert.commit();
            }
            DropResult r = drop.result();
            assertTrue(r.isComplete(), r::toString);
            for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                assertEquals(-1, P2pKv.firstMismatch(dCache, dBlocks, l, 5), "layer " + l);
            }
            return p.metrics.writeRequests() - before;
        }
    }

    @Test
    void consecutiveBlocksOfDGoAsOneWritePerTensorAndScatteredOnesAsOneEach() {
        BlockTable consecutive = P2pKv.table(20, 1, BLOCKS, TOKENS);
        BlockTable scattered = P2pKv.table(40, 2, BLOCKS, TOKENS);
        BlockTable twoRuns = new BlockTable(new int[] {2, 3, 4, 10, 11, 12, 13}, P2pKv.LAYOUT.blockSize(), TOKENS);
        int layers = P2pKv.LAYOUT.numLayers();
        int tensors = P2pKv.LAYOUT.tensorsPerLayer();
        try (TransferEngineConnector p = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT)
                .stagingBytes(1L << 20).build()) {
            assertEquals(layers * tensors, transfer(p, "t-consecutive", consecutive));
            assertEquals(layers * tensors * BLOCKS, transfer(p, "t-scattered", scattered));
            assertEquals(layers * tensors * 2, transfer(p, "t-two-runs", twoRuns));
        }
        assertTrue(P2pKv.untouchedOutside(dCache, P2pKv.ids(consecutive), P2pKv.ids(scattered),
                P2pKv.ids(twoRuns)));
    }

    @Test
    void aLayerNeedingMoreWritesThanABatchHoldsIsRefusedAtBeginInsertNamingTheSetting() {
        BlockTable scattered = P2pKv.table(40, 2, BLOCKS, TOKENS);
        try (TransferEngineConnector p = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT)
                .stagingBytes(1L << 20).maxBlocksPerRequest(BLOCKS - 1).build()) {
            RequestTokens request = RequestTokens.of(new int[TOKENS]).inNamespace("t-too-many");
            try (P2pDropSession drop = d.beginDropSelect(request, DropTarget.paged(dCache, scattered))) {
                KVException e = assertThrows(KVException.class, () -> p.beginInsert(request,
                        drop.transferParams()));
                assertEquals(ErrorCode.INVALID_CONFIG, e.code());
                assertTrue(e.getMessage().contains("14 WRITE requests") && e.getMessage().contains("(12)")
                        && e.getMessage().contains("maxBlocksPerRequest"), e.getMessage());
                assertFalse(drop.result().isHit());
            }
            assertTrue(P2pKv.untouchedOutside(dCache), "D's cache is unchanged");
            assertEquals(P2pKv.LAYOUT.numLayers() * 2L, transfer(p, "t-fits", P2pKv.table(20, 1, BLOCKS, TOKENS)),
                    "7 consecutive blocks are one run, which fits a batch of 6 blocks x 2 tensors");
        }
    }

    @Test
    void everyByteArrivesWithOneLayerInFlightAndWithMoreThanTheRequestHas() {
        BlockTable scattered = P2pKv.table(40, 2, BLOCKS, TOKENS);
        for (int layers : new int[] {1, P2pKv.LAYOUT.numLayers() + 2}) {
            try (TransferEngineConnector p = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT)
                    .stagingBytes(1L << 20).layersInFlight(layers).build()) {
                transfer(p, "t-in-flight-" + layers, scattered);
                assertEquals(1, p.metrics().commits(), layers + " in flight");
            }
        }
    }

    @Test
    void fewerThanOneLayerInFlightIsRefusedNamingTheSetting() {
        KVException e = assertThrows(KVException.class, () -> TransferEngineConnector.builder(target.uri(),
                P2pKv.LAYOUT).layersInFlight(0).build());
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains("layersInFlight > 0, not 0"), e.getMessage());
    }

    @Test
    void aPutLayerAllocatesNothingOnceWarm() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long thread = Thread.currentThread().threadId();
        LayerSource source = LayerSource.paged(pCache, pBlocks);
        BlockTable scattered = P2pKv.table(40, 2, BLOCKS, TOKENS);
        long best = Long.MAX_VALUE;
        try (TransferEngineConnector p = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT)
                .stagingBytes(1L << 20).build()) {
            for (int i = 0; i < 300 && best > 0; i++) {
                RequestTokens request = RequestTokens.of(new int[TOKENS]).inNamespace("t-alloc-" + i);
                try (P2pDropSession drop = d.beginDropSelect(request, DropTarget.paged(dCache, scattered));
                     InsertSession insert = p.beginInsert(request, drop.transferParams())) {
                    long before = mx.getThreadAllocatedBytes(thread);
                    for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                        insert.putLayer(l, source);
                    }
                    best = Math.min(best, mx.getThreadAllocatedBytes(thread) - before);
                    insert.commit();
                    assertTrue(drop.result().isComplete());
                }
            }
        }
        assertEquals(0, best, "bytes allocated by the best request's " + P2pKv.LAYOUT.numLayers() + " putLayer calls "
                + "(gather, WRITEs, submit with the L message, reaping)");
    }

    @Test
    void dsSlotsThatAreNotWholeBlocksInOrderAreRefusedNamingTheToken() {
        int bs = P2pKv.LAYOUT.blockSize();
        long[] shifted = new long[TOKENS];
        long[] swapped = new long[TOKENS];
        for (int t = 0; t < TOKENS; t++) {
            shifted[t] = 20L * bs + 1 + t;
            swapped[t] = 20L * bs + t;
        }
        swapped[bs + 3] = swapped[bs + 4];
        RequestTokens request = RequestTokens.of(new int[TOKENS]).inNamespace("t-rows");
        KVException first = assertThrows(KVException.class, () -> d.beginDropSelect(request,
                DropTarget.paged(dCache, new SlotMapping(shifted))));
        assertEquals(ErrorCode.UNSUPPORTED, first.code());
        assertTrue(first.getMessage().contains("token 0 maps to slot " + (20 * bs + 1))
                && first.getMessage().contains("t-rows"), first.getMessage());
        KVException inside = assertThrows(KVException.class, () -> d.beginDropSelect(request,
                DropTarget.paged(dCache, new SlotMapping(swapped))));
        assertTrue(inside.getMessage().contains("token " + (bs + 3) + " maps to slot " + (21 * bs + 4)),
                inside.getMessage());
        assertTrue(P2pKv.untouchedOutside(dCache), "D's cache is unchanged");
    }
}
