package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectors;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.testkit.Segments;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * P's side of the concurrent flow, layer by layer: layers P computed before D's destination arrived are held and
 * written when it does, each later layer is written as soon as it is computed, and D's {@code awaitLayer(i)}
 * returns while P has not yet computed layer {@code i + 1}. P's prefill is driven by hand, one layer at a time.
 */
class P2pLayerStreamingTest {
    private static final KVLayout LAYOUT = ModelConfig.small(3).kvLayout();
    private static final int TOKENS = 40;
    private static final String TRANSFER = "t-stream";

    private PagedKVCache pCache;
    private PagedKVCache dCache;
    private P2pTransport p;
    private P2pTransport d;
    private HttpServer pServer;
    private final BlockingQueue<Integer> answers = new LinkedBlockingQueue<>();
    private final BlockTable pTable = new BlockTable(new int[] {5, 6, 7}, LAYOUT.blockSize(), TOKENS);
    private final BlockTable dTable = new BlockTable(new int[] {2, 9, 4}, LAYOUT.blockSize(), TOKENS);

    @BeforeEach
    void start() throws IOException {
        pCache = PagedKVCache.allocate(LAYOUT, 12);
        dCache = PagedKVCache.allocate(LAYOUT, 12);
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                Segments.fill(pCache.tensor(l, t), 100L * l + t);
            }
        }
        p = transport(KVRole.PRODUCER, pCache);
        d = transport(KVRole.CONSUMER, dCache);
        pServer = P2pTestKit.sendEndpoint(p, answers);
    }

    private static P2pTransport transport(KVRole role, PagedKVCache cache) {
        return new P2pTransport(KVConnectors.open(P2pTransport.kvTransferConfig(role, P2pTransportTest.engineUri(),
                5_000, null, null), new ConnectorContext(LAYOUT, "m", List.of(cache))));
    }

    @AfterEach
    void stop() {
        pServer.stop(0);
        d.close();
        p.close();
        dCache.close();
        pCache.close();
    }

    private CompletableFuture<DropResult> dReceives(int[] prompt, BlockingQueue<Integer> landed) {
        KVTransferParams fromProxy = KVTransferParams.builder().transferId(TRANSFER).doRemotePrefill(true)
                .remoteHost("127.0.0.1").remotePort(pServer.getAddress().getPort()).build();
        return CompletableFuture.supplyAsync(() -> d.receive(RequestTokens.of(prompt).inNamespace(TRANSFER),
                DropTarget.paged(dCache, dTable), fromProxy, LAYOUT.numLayers(), landed::add));
    }

    /** Computes the layers from {@code from} one by one, each reaching D before the next is computed; then ends. */
    private void computeAndCheckEachLands(P2pOutgoing out, int from, BlockingQueue<Integer> landed,
                                          CompletableFuture<DropResult> result) throws Exception {
        for (int l = from; l < LAYOUT.numLayers(); l++) {
            out.layerComputed(l);
            assertEquals(l, landed.poll(10, TimeUnit.SECONDS), "layer " + l + " did not go to D once computed");
            if (l + 1 < LAYOUT.numLayers()) {
                assertFalse(result.isDone(), "D's drop-select ended before P computed layer " + (l + 1));
            }
        }
        AtomicBoolean freed = new AtomicBoolean();
        out.prefillEnded(null);
        out.engineDone(() -> freed.set(true));
        DropResult r = result.get(10, TimeUnit.SECONDS);
        assertTrue(r.isComplete(), r::toString);
        assertTrue(freed.get(), "P's blocks were not given back after the commit");
        for (int l = 0; l < LAYOUT.numLayers(); l++) {
            assertTrue(P2pTestKit.sameLayer(LAYOUT, TOKENS, l, pCache, pTable, dCache, dTable),
                    "layer " + l + " differs between P's and D's blocks");
        }
        assertEquals(p.connector().metrics().insertedBytes(), d.connector().metrics().droppedBytes());
    }

    @Test
    void layersComputedBeforeTheDestinationAreHeldAndEachLaterOneIsWrittenAsSoonAsItIsComputed() throws Exception {
        int[] prompt = IntStream.range(0, TOKENS).toArray();
        P2pOutgoing out = p.beginPrefill(TRANSFER, prompt, pCache, pTable);
        out.layerComputed(0);
        out.layerComputed(1);

        BlockingQueue<Integer> landed = new LinkedBlockingQueue<>();
        CompletableFuture<DropResult> result = dReceives(prompt, landed);

        assertEquals(0, landed.poll(10, TimeUnit.SECONDS), "layer 0, computed before D asked, never reached D");
        assertEquals(1, landed.poll(10, TimeUnit.SECONDS));
        assertNull(landed.poll(200, TimeUnit.MILLISECONDS), "D accepted a layer P has not computed");
        computeAndCheckEachLands(out, 2, landed, result);
    }

    @Test
    void aDestinationThatArrivesBeforeThePrefillBeginsIsKeptAndEachLayerFollowsIt() throws Exception {
        int[] prompt = IntStream.range(0, TOKENS).toArray();
        BlockingQueue<Integer> landed = new LinkedBlockingQueue<>();
        CompletableFuture<DropResult> result = dReceives(prompt, landed);
        assertEquals(202, answers.poll(10, TimeUnit.SECONDS), "P did not take a destination before its prefill");

        computeAndCheckEachLands(p.beginPrefill(TRANSFER, prompt, pCache, pTable), 0, landed, result);
    }
}
