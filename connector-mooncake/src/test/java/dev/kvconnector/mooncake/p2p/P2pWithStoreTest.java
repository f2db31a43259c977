package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.multi.MultiConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Both paths at once (vLLM's MultiConnector pattern): P2P moves the request in flight into D's blocks, and a
 * vllm-v1 store keeps its blocks, so a later request with the same prompt loads from the store with no P at all.
 */
class P2pWithStoreTest {
    private static final int TOKENS = 96;

    private KVStore store;
    private PagedKVCache dCache;
    private PagedKVCache pCache;
    private MultiConnector d;
    private MultiConnector p;
    private TransferEngineConnector p2pD;
    private TransferEngineConnector p2pP;
    private final BlockTable pBlocks = P2pKv.table(30, 1, 6, TOKENS);

    @BeforeEach
    void open() {
        TeTestTarget target = TeTestTarget.require();
        store = KVStores.open("memory:?capacity=64MiB");
        dCache = P2pKv.untouchedCache();
        pCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        P2pKv.compute(pCache, pBlocks, 11);
        p2pD = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT).registerCache(dCache)
                .layerTimeoutMillis(3000).stagingBytes(4L << 20).build();
        p2pP = TransferEngineConnector.builder(target.uri(), P2pKv.LAYOUT).stagingBytes(4L << 20).build();
        d = MultiConnector.of(List.of(p2pD, KVStoreConnector.builder(store, P2pKv.LAYOUT).keyScheme("vllm-v1")
                .modelId("m").dropMode(DropMode.RETAIN).stagingBytes(8L << 20).build()));
        p = MultiConnector.of(List.of(p2pP, KVStoreConnector.builder(store, P2pKv.LAYOUT).keyScheme("vllm-v1")
                .modelId("m").stagingBytes(8L << 20).build()));
    }

    @AfterEach
    void close() {
        p.close();
        d.close();
        store.close();
        dCache.close();
        pCache.close();
    }

    private static RequestTokens request(String transferId) {
        return RequestTokens.of(IntStream.range(900, 900 + TOKENS).toArray()).inNamespace(transferId);
    }

    @Test
    void theRequestInFlightArrivesPeerToPeerAndTheNextWithTheSamePromptFromTheStore() {
        BlockTable first = P2pKv.table(2, 1, 6, TOKENS);
        assertFalse(d.holdsHiddenStates(), "vLLM V1's blocks hold no hidden states");
        try (DropSession drop = d.beginDropSelect(request("t-1"), DropTarget.paged(dCache, first))) {
            P2pDropSession p2p = assertInstanceOf(P2pDropSession.class, drop, "nothing stored yet: P2P waits");
            p2pP.acceptDestination(p2p.transferParams());
            try (InsertSession insert = p.beginInsert(request("t-1"))) {
                for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
                    insert.putLayer(l, pCache, pBlocks);
                }
                insert.commit();
            }
            assertTrue(drop.result().isComplete(), drop.result()::toString);
        }
        for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
            assertEquals(-1, P2pKv.firstMismatch(dCache, first, l, 11), "P2P, layer " + l);
        }

        BlockTable second = P2pKv.table(20, 1, 6, TOKENS);
        assertEquals(TOKENS, d.lookup(request("t-2")), "the store keeps the prompt for any transfer");
        assertSame(d.connectors().get(1), d.loadFrom(request("t-2")));
        DropResult reuse = d.dropSelect(request("t-2"), DropTarget.paged(dCache, second));
        assertTrue(reuse.isComplete(), reuse::toString);
        for (int l = 0; l < P2pKv.LAYOUT.numLayers(); l++) {
            assertEquals(-1, P2pKv.firstMismatch(dCache, second, l, 11), "store, layer " + l);
        }
        assertTrue(P2pKv.untouchedOutside(dCache, P2pKv.ids(first), P2pKv.ids(second)));
        assertEquals(1, p2pP.metrics().commits(), "the second request needed no P");
    }
}
