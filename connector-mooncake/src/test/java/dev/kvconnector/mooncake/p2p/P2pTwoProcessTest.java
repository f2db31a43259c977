package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TeChildJvm;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * D in this JVM, P ({@link P2pPeer}) in a child JVM: P writes its layers into D's registered host paged cache
 * through the transfer engine (loopback TCP with the double, or the real library when {@code MOONCAKE_TE_LIB}
 * names it), and every byte of D's cache is checked here: the request's blocks hold P's KV, every other block is
 * untouched.
 */
class P2pTwoProcessTest {
    private static final int TOKENS = 100;

    private TeTestTarget target;
    private PagedKVCache cache;
    private TransferEngineConnector d;
    private Arena arena;

    @BeforeEach
    void open() {
        target = TeTestTarget.require();
        cache = P2pKv.untouchedCache();
        d = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT).registerCache(cache)
                .layerTimeoutMillis(3000).stagingBytes(4L << 20).build();
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        d.close();
        cache.close();
        arena.close();
    }

    private static RequestTokens request(String tid) {
        return RequestTokens.of(new int[TOKENS]).inNamespace(tid);
    }

    private TeChildJvm producer(String mode, long delayMs, Object... seedAndParams) throws Exception {
        String[] args = new String[3 + seedAndParams.length];
        args[0] = mode;
        args[1] = target.uri();
        args[2] = Long.toString(delayMs);
        for (int i = 0; i < seedAndParams.length; i++) {
            args[3 + i] = seedAndParams[i].toString();
        }
        return TeChildJvm.start(P2pPeer.class, args);
    }

    @Test
    void layersLandInDsBlocksOneByOneWhileTheProducerStillComputesEveryByteChecked() throws Exception {
        String tid = "t-" + UUID.randomUUID();
        BlockTable blocks = P2pKv.table(40, -3, 7, TOKENS);
        Tensor hidden = P2pKv.hidden(arena, TOKENS, 0);
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(cache, blocks).withHidden(hidden));
             TeChildJvm p = producer("produce", 400, 5, drop.transferParams().toJson())) {
            for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                assertTrue(drop.awaitLayer(l), () -> "layer landed; P said:\n" + p.output());
                assertEquals(-1, P2pKv.firstMismatch(cache, blocks, l, 5), "layer " + l + " byte for byte");
                if (l + 1 < P2pKv.LAYOUT.numLayers()) {
                    assertTrue(P2pKv.untouched(cache, blocks, l + 1), "layer " + (l + 1)
                            + " has not arrived when layer " + l + " is awaited: P computes 400 ms per layer");
                    assertEquals(0, d.lookup(request(tid)), "not committed before the last layer");
                }
            }
            DropResult r = drop.result();
            assertTrue(r.isComplete(), r::toString);
            assertTrue(Segments.equal(P2pKv.hidden(arena, TOKENS, 5).segment(), hidden.segment(),
                    hidden.spec().byteSize()), "hidden states byte for byte");
            assertTrue(P2pKv.untouchedOutside(cache, P2pKv.ids(blocks)), "no byte outside the request's blocks");
            p.await("DONE", 30);
            assertEquals(0, p.exitCode(30), p::output);
        }
        assertEquals(P2pKv.LAYOUT.numLayers(), d.metrics().dropLayer().count());
        assertEquals(1, d.metrics().hits());
    }

    @Test
    void producerKilledMidLayerIsATimeoutMissAndTheHalfLayerIsNeverAccepted() throws Exception {
        String tid = "t-" + UUID.randomUUID();
        BlockTable blocks = P2pKv.table(10, 1, 7, TOKENS);
        long start;
        try (P2pDropSession drop = d.beginDropSelect(request(tid), DropTarget.paged(cache, blocks));
             TeChildJvm p = producer("die", 0, 9, drop.transferParams().toJson())) {
            assertTrue(drop.awaitLayer(0), p::output);
            assertTrue(drop.awaitLayer(1), p::output);
            p.await("HALF", 30);
            p.kill();
            start = System.nanoTime();
            assertFalse(drop.awaitLayer(2), "a layer whose bytes are half there is never accepted");
            DropResult r = drop.result();
            assertEquals(MissReason.TIMED_OUT, r.reason(), r::toString);
            assertTrue(r.detail().contains(tid) && r.detail().contains("layer 2") && r.detail().contains("did P die"),
                    r.detail());
            assertEquals(-1, P2pKv.firstMismatch(cache, blocks, 0, 9));
            assertEquals(-1, P2pKv.firstMismatch(cache, blocks, 1, 9));
            assertNotEquals(-1, P2pKv.firstMismatch(cache, blocks, 2, 9), "the half write did land");
        }
        long waited = (System.nanoTime() - start) / 1_000_000;
        assertTrue(waited < 10_000, "D gave its blocks back after its 3 s timeout, not later: " + waited + " ms");
        assertEquals(1, d.metrics().misses().get(MissReason.TIMED_OUT));
    }

    @Test
    void twoTransfersAtOnceIntoDifferentBlocksEachGetTheirOwnBytes() throws Exception {
        BlockTable a = P2pKv.table(0, 2, 7, TOKENS);
        BlockTable b = P2pKv.table(1, 2, 7, TOKENS);
        try (P2pDropSession da = d.beginDropSelect(request("a-" + UUID.randomUUID()), DropTarget.paged(cache, a));
             P2pDropSession db = d.beginDropSelect(request("b-" + UUID.randomUUID()), DropTarget.paged(cache, b));
             TeChildJvm p = producer("produce", 0, 21, da.transferParams().toJson(), 22,
                     db.transferParams().toJson())) {
            assertTrue(da.result().isComplete(), () -> da.result() + "\n" + p.output());
            assertTrue(db.result().isComplete(), () -> db.result() + "\n" + p.output());
            for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                assertEquals(-1, P2pKv.firstMismatch(cache, a, l, 21), "transfer a, layer " + l);
                assertEquals(-1, P2pKv.firstMismatch(cache, b, l, 22), "transfer b, layer " + l);
            }
            assertTrue(P2pKv.untouchedOutside(cache, P2pKv.ids(a), P2pKv.ids(b)));
            assertEquals(0, p.exitCode(30), p::output);
        }
    }
}
