package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.BooleanNode;
import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectors;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.p2p.TransferEngineConnector;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.testkit.Segments;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * D's side of a concurrent prefill that the proxy retried on another P ({@link P2pTransport#prefillMoved}): D keeps
 * the layers it accepted from the first P and takes the others from the second, a notice that comes before D's
 * request is held for it, one that the proxy gave the prefill up ends D's wait at once, and one for a transfer D has
 * ended is refused by name. The two P's caches hold different
 * bytes, so every layer in D's blocks tells which P wrote it; their prefills are driven by hand, a layer at a time.
 */
class P2pPrefillMoveTest {
    private static final KVLayout LAYOUT = ModelConfig.small(3).kvLayout();
    private static final int TOKENS = 40;
    private static final String TRANSFER = "t-moved";

    private PagedKVCache firstCache;
    private PagedKVCache secondCache;
    private PagedKVCache dCache;
    private P2pTransport first;
    private P2pTransport second;
    private P2pTransport d;
    private HttpServer firstServer;
    private HttpServer secondServer;
    private final BlockingQueue<Integer> firstAnswers = new LinkedBlockingQueue<>();
    private final BlockingQueue<Integer> secondAnswers = new LinkedBlockingQueue<>();
    private final BlockTable pTable = new BlockTable(new int[] {5, 6, 7}, LAYOUT.blockSize(), TOKENS);
    private final BlockTable dTable = new BlockTable(new int[] {2, 9, 4}, LAYOUT.blockSize(), TOKENS);
    private final int[] prompt = IntStream.range(0, TOKENS).toArray();

    @BeforeEach
    void start() throws IOException {
        firstCache = filled(0);
        secondCache = filled(1_000_000);
        dCache = PagedKVCache.allocate(LAYOUT, 12);
        first = transport(KVRole.PRODUCER, firstCache);
        second = transport(KVRole.PRODUCER, secondCache);
        d = transport(KVRole.CONSUMER, dCache);
        firstServer = P2pTestKit.sendEndpoint(first, firstAnswers);
        secondServer = P2pTestKit.sendEndpoint(second, secondAnswers);
    }

    private static PagedKVCache filled(long seed) {
        PagedKVCache c = PagedKVCache.allocate(LAYOUT, 12);
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                Segments.fill(c.tensor(l, t), seed + 100L * l + t);
            }
        }
        return c;
    }

    private static P2pTransport transport(KVRole role, PagedKVCache cache) {
        return new P2pTransport(KVConnectors.open(P2pTransport.kvTransferConfig(role, P2pTransportTest.engineUri(),
                10_000, null, null), new ConnectorContext(LAYOUT, "m", List.of(cache))));
    }

    @AfterEach
    void stop() {
        secondServer.stop(0);
        firstServer.stop(0);
        d.close();
        second.close();
        first.close();
        dCache.close();
        secondCache.close();
        firstCache.close();
    }

    /** D's request, as the proxy's concurrent flow with retries sends it: naming the first P, saying it may move. */
    private CompletableFuture<DropResult> dReceives(BlockingQueue<Integer> landed) {
        KVTransferParams fromProxy = KVTransferParams.builder().transferId(TRANSFER).doRemotePrefill(true)
                .remoteHost("127.0.0.1").remotePort(firstServer.getAddress().getPort())
                .unknownField(P2pTransport.MAY_MOVE_FIELD, BooleanNode.TRUE).build();
        return CompletableFuture.supplyAsync(() -> d.receive(RequestTokens.of(prompt).inNamespace(TRANSFER),
                DropTarget.paged(dCache, dTable), fromProxy, LAYOUT.numLayers(), landed::add));
    }

    private static void computeAll(P2pOutgoing out) {
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            out.layerComputed(l);
        }
        out.prefillEnded(null);
        out.engineDone(() -> { });
    }

    @Test
    void aPrefillThatMovesMidwayKeepsTheLayersDAcceptedAndTakesTheOthersFromTheNewP() throws Exception {
        BlockingQueue<Integer> landed = new LinkedBlockingQueue<>();
        CompletableFuture<DropResult> result = dReceives(landed);
        assertEquals(202, firstAnswers.poll(10, TimeUnit.SECONDS), "D did not ask the first P");
        P2pOutgoing failing = first.beginPrefill(TRANSFER, prompt, firstCache, pTable);
        for (int l = 0; l < 3; l++) {
            failing.layerComputed(l);
            assertEquals(l, landed.poll(10, TimeUnit.SECONDS), "layer " + l + " from the first P");
        }
        failing.prefillFailed(new IllegalStateException("the first P's forward pass broke"));
        failing.engineDone(() -> { });
        // A late layer from the first P, after its abort on the same connection: refused, D's blocks untouched.
        TransferEngineConnector dP2p = (TransferEngineConnector) d.connector();
        TransferEngineConnector firstP2p = (TransferEngineConnector) first.connector();
        firstP2p.engine().notify(firstP2p.engine().openSegment(dP2p.engine().segmentName()), TRANSFER,
                "kvc-p2p/1 L " + firstP2p.engine().segmentName() + " 3 " + LAYOUT.layerBytes(TOKENS) + " 12345");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (dP2p.staleNotifications() == 0 && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(1, dP2p.staleNotifications(), "the first P's late layer was not refused");
        assertFalse(result.isDone(), "D stopped waiting when the first P aborted: " + result.getNow(null));

        int from = d.prefillMoved(TRANSFER, "127.0.0.1", secondServer.getAddress().getPort());

        assertEquals(3, from, "the next layer D awaits");
        assertEquals(202, secondAnswers.poll(10, TimeUnit.SECONDS), "D did not ask the second P");
        computeAll(second.beginPrefill(TRANSFER, prompt, secondCache, pTable));
        DropResult r = result.get(10, TimeUnit.SECONDS);
        assertTrue(r.isComplete(), "D did not load the moved prefill: " + r);
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            assertTrue(P2pTestKit.sameLayer(LAYOUT, TOKENS, l, l < 3 ? firstCache : secondCache, pTable, dCache,
                    dTable), "layer " + l + " is not from "
                    + (l < 3 ? "the first P, which D had accepted it from" : "the second P"));
        }
        assertEquals(LAYOUT.layerBytes(TOKENS) * (LAYOUT.numLayers() - 3),
                second.connector().metrics().insertedBytes(), "the second P wrote the layers from 3 on, and no other");
    }

    @Test
    void aNoticeThatComesBeforeDsRequestIsHeldAndTheRequestAsksTheNewPStraightAway() throws Exception {
        assertEquals(-1, d.prefillMoved(TRANSFER, "127.0.0.1", secondServer.getAddress().getPort()));

        CompletableFuture<DropResult> result = dReceives(new LinkedBlockingQueue<>());

        assertEquals(202, secondAnswers.poll(10, TimeUnit.SECONDS), "D did not ask the P the notice named");
        computeAll(second.beginPrefill(TRANSFER, prompt, secondCache, pTable));
        assertTrue(result.get(10, TimeUnit.SECONDS).isComplete());
        assertNull(firstAnswers.poll(100, TimeUnit.MILLISECONDS), "D asked the P the prefill moved away from");
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            assertTrue(P2pTestKit.sameLayer(LAYOUT, TOKENS, l, secondCache, pTable, dCache, dTable), "layer " + l);
        }
    }

    @Test
    void aPrefillThatTheProxyGaveUpEndsDsWaitAtOnceAsAMissNamingIt() throws Exception {
        BlockingQueue<Integer> landed = new LinkedBlockingQueue<>();
        CompletableFuture<DropResult> result = dReceives(landed);
        assertEquals(202, firstAnswers.poll(10, TimeUnit.SECONDS));
        P2pOutgoing failing = first.beginPrefill(TRANSFER, prompt, firstCache, pTable);
        failing.layerComputed(0);
        assertEquals(0, landed.poll(10, TimeUnit.SECONDS));
        failing.prefillFailed(new IllegalStateException("the first P's forward pass broke"));
        failing.engineDone(() -> { });
        long start = System.nanoTime();

        assertTrue(d.prefillAbandoned(TRANSFER), "D's request was waiting");

        DropResult r = result.get(10, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertEquals(MissReason.ABSENT, r.reason(), r::toString);
        assertTrue(r.detail().contains(TRANSFER) && r.detail().contains("gave up"), r.detail());
        assertTrue(ms < 5_000, "D waited " + ms + " ms, toward its 10 s layer timeout");
    }

    @Test
    void aNoticeForATransferDHasEndedIsRefusedNamingIt() throws Exception {
        CompletableFuture<DropResult> result = dReceives(new LinkedBlockingQueue<>());
        assertEquals(202, firstAnswers.poll(10, TimeUnit.SECONDS));
        computeAll(first.beginPrefill(TRANSFER, prompt, firstCache, pTable));
        assertTrue(result.get(10, TimeUnit.SECONDS).isComplete());

        KVException e = assertThrows(KVException.class, () -> d.prefillMoved(TRANSFER, "127.0.0.1",
                secondServer.getAddress().getPort()));

        assertEquals(ErrorCode.CLOSED, e.code());
        assertTrue(e.getMessage().contains(TRANSFER) && e.getMessage().contains("has ended"), e.getMessage());
        assertNull(secondAnswers.poll(100, TimeUnit.MILLISECONDS), "D asked a P for a transfer it has ended");
        assertThrows(KVException.class, () -> d.prefillMoved(TRANSFER, "127.0.0.1", 0), "port 0 is no P");
    }
}
