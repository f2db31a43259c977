package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.multi.MultiConnector;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectors;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Both paths at once (vLLM's MultiConnector pattern), chosen by kv_transfer_config with no code: P2P moves the
 * request in flight into D's blocks, and a vllm-v1 store keeps its blocks, so a later request with the same prompt
 * loads from the store with no P at all.
 */
class P2pWithStoreTest {
    private static final int TOKENS = 96;
    private static final String NESTED = "kv_transfer_config.kv_connector_extra_config.connectors[0]"
            + ".kv_connector_extra_config.";

    @TempDir
    static Path dir;
    private String storeUri;
    private PagedKVCache dCache;
    private PagedKVCache pCache;
    private MultiConnector d;
    private MultiConnector p;
    private TransferEngineConnector p2pD;
    private TransferEngineConnector p2pP;
    private final BlockTable pBlocks = P2pKv.table(30, 1, 6, TOKENS);

    /** vLLM's form: the P2P connector first, for the request in flight, then the store, for prefix reuse. */
    private static String config(String role, String engineUri, String storeUri) {
        return """
                {"kv_connector": "MultiConnector", "kv_role": "%s", "kv_connector_extra_config": {"connectors": [
                  {"kv_connector": "TransferEngineConnector", "kv_role": "%1$s", "kv_connector_extra_config":
                    {"engine_uri": "%s", "layer_timeout_ms": 3000, "staging_bytes": 4194304}},
                  {"kv_connector": "StoreConnector", "kv_role": "%1$s", "kv_connector_extra_config":
                    {"store_uri": "%s", "key_scheme": "vllm-v1", "staging_bytes": 8388608}}]}}
                """.formatted(role, engineUri, storeUri);
    }

    private static KVStoreConnector open(String json, PagedKVCache cache) {
        return KVConnectors.open(KvTransferConfig.fromJson(json), new ConnectorContext(P2pKv.LAYOUT, "m",
                List.of(cache)));
    }

    @BeforeEach
    void open() {
        TeTestTarget target = TeTestTarget.require();
        storeUri = "shm:/p2p-store-" + UUID.randomUUID() + "?capacity=64MiB&dir=" + dir;
        dCache = P2pKv.untouchedCache();
        pCache = PagedKVCache.allocate(P2pKv.LAYOUT, P2pKv.CACHE_BLOCKS);
        P2pKv.compute(pCache, pBlocks, 11);
        d = assertInstanceOf(MultiConnector.class, open(config("kv_consumer", target.uri(), storeUri), dCache));
        p = assertInstanceOf(MultiConnector.class, open(config("kv_producer", target.uri(), storeUri), pCache));
        p2pD = assertInstanceOf(TransferEngineConnector.class, d.connectors().getFirst());
        p2pP = assertInstanceOf(TransferEngineConnector.class, p.connectors().getFirst());
    }

    @AfterEach
    void close() {
        p.close();
        d.close();
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
        assertEquals(p2pP.metrics().insertedBytes(), p2pD.metrics().droppedBytes(), "P2P: P wrote what D accepted");
        assertEquals(p.connectors().get(1).metrics().insertedBytes(), d.connectors().get(1).metrics().droppedBytes(),
                "store: D read what P stored");
    }

    @Test
    void aMissingOrBadEngineUriIsAnErrorNamingTheField() {
        KVException missing = assertThrows(KVException.class, () -> open(config("kv_both", "x", storeUri)
                .replace("\"engine_uri\": \"x\", ", ""), dCache).close());
        assertEquals(ErrorCode.INVALID_CONFIG, missing.code());
        assertTrue(missing.getMessage().contains(NESTED + "engine_uri is missing"), missing.getMessage());

        KVException scheme = assertThrows(KVException.class, () -> open(config("kv_both", "mooncake://127.0.0.1",
                storeUri), dCache).close());
        assertEquals(ErrorCode.INVALID_URI, scheme.code());
        assertTrue(scheme.getMessage().contains(NESTED + "engine_uri: ") && scheme.getMessage().contains("mooncake-te"),
                scheme.getMessage());

        KVException option = assertThrows(KVException.class, () -> open(config("kv_both",
                TeTestTarget.require().uri() + "&speed=fast", storeUri), dCache).close());
        assertEquals(ErrorCode.INVALID_URI, option.code());
        assertTrue(option.getMessage().contains(NESTED + "engine_uri: ") && option.getMessage().contains("speed"),
                option.getMessage());
    }

    @Test
    void aProducerRegistersNoCacheAndAConsumerRegistersTheContexts() {
        DropTarget target = DropTarget.paged(pCache, P2pKv.table(2, 1, 6, TOKENS));
        KVException e = assertThrows(KVException.class, () -> p.connectors().getFirst()
                .beginDropSelect(request("t-9"), target));
        assertEquals(ErrorCode.UNSUPPORTED, e.code(), "a kv_producer's cache is not registered for peers to write");
    }
}
