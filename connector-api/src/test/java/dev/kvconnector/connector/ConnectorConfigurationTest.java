package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Isolated;

/** Settings come from system properties or defaults, are validated once, and I/O-thread failures reach a handler. */
@Isolated("sets system properties that every connector built meanwhile would read")
class ConnectorConfigurationTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");

    @AfterEach
    void clearProperties() {
        System.clearProperty(ConnectorConfiguration.CHUNK_TOKENS_PROP_NAME);
        System.clearProperty(ConnectorConfiguration.STAGING_BYTES_PROP_NAME);
        System.clearProperty(ConnectorConfiguration.DROP_MODE_PROP_NAME);
    }

    @Test
    void aSystemPropertySetsTheDefaultAndTheBuilderWins() {
        System.setProperty(ConnectorConfiguration.CHUNK_TOKENS_PROP_NAME, "64");
        System.setProperty(ConnectorConfiguration.STAGING_BYTES_PROP_NAME, "64MiB");
        assertEquals(64, ConnectorConfiguration.chunkTokens());
        assertEquals(64L << 20, ConnectorConfiguration.stagingBytes());
        try (var store = KVStores.open("memory:?capacity=64MiB");
             KVStoreConnector fromProperty = KVStoreConnector.builder(store, LAYOUT).build();
             KVStoreConnector fromBuilder = KVStoreConnector.builder(store, LAYOUT).chunkTokens(32).build()) {
            assertEquals(64, fromProperty.keyContext().chunkTokens());
            assertEquals(32, fromBuilder.keyContext().chunkTokens());
        }
        System.clearProperty(ConnectorConfiguration.CHUNK_TOKENS_PROP_NAME);
        assertEquals(ConnectorConfiguration.CHUNK_TOKENS_DEFAULT, ConnectorConfiguration.chunkTokens());
    }

    @Test
    void anUnreadablePropertyIsAnErrorNamingItAndItsValue() {
        System.setProperty(ConnectorConfiguration.DROP_MODE_PROP_NAME, "keep");
        KVException e = assertThrows(KVException.class, ConnectorConfiguration::dropMode);
        assertEquals(ErrorCode.INVALID_CONFIG, e.code());
        assertTrue(e.getMessage().contains(ConnectorConfiguration.DROP_MODE_PROP_NAME + "=keep")
                && e.getMessage().contains("consume or retain"), e.getMessage());
        System.setProperty(ConnectorConfiguration.STAGING_BYTES_PROP_NAME, "lots");
        e = assertThrows(KVException.class, ConnectorConfiguration::stagingBytes);
        assertTrue(e.getMessage().contains(ConnectorConfiguration.STAGING_BYTES_PROP_NAME + "=lots"), e.getMessage());
    }

    @Test
    void aLayerPutThatFailsOnAnIoThreadReachesTheErrorHandlerAndTheProducer() {
        assertAPutFailureReachesTheHandlerOnceAndTheProducer("kvc-v1", "layer put");
    }

    @Test
    void aChunkObjectPutThatFailsOnAnIoThreadReachesTheErrorHandlerAndTheProducer() {
        // vllm-v1's objects hold every layer of a block: they are put by the chunk-object path (PendingPuts).
        assertAPutFailureReachesTheHandlerOnceAndTheProducer(VllmV1KeyScheme.NAME, "chunk put");
    }

    private static void assertAPutFailureReachesTheHandlerOnceAndTheProducer(String scheme, String expectedWhere) {
        List<String> where = new CopyOnWriteArrayList<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        CountingStoreTestDouble store = new CountingStoreTestDouble(KVStores.open("memory:?capacity=64MiB"),
                EnumSet.of(StoreCapability.REMOVE, StoreCapability.BATCH));
        KVException down = KVException.of(ErrorCode.STORE_UNREACHABLE, "test double: the store went down").build();
        store.putFailure = down;
        int[] ids = new int[48]; // whole 16-token blocks, so vllm-v1 stores every token
        try (store; Arena arena = Arena.ofConfined();
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).keyScheme(scheme).ioThreads(1)
                     .errorHandler((w, f) -> {
                         where.add(w);
                         failures.add(f);
                     }).build();
             InsertSession insert = kv.beginInsert(RequestTokens.of(ids))) {
            TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), ids.length, LAYOUT.kvHeads(), LAYOUT.headSize());
            Tensor k = Tensor.host(spec, arena.allocate(spec.byteSize()));
            // The failure surfaces at the first call after the I/O thread met it: a later putLayer, or the commit.
            KVException e = assertThrows(KVException.class, () -> {
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    insert.putLayer(l, k, k);
                }
                insert.commit();
            });
            assertSame(down, e);
        }
        assertEquals(List.of(down), failures, "the handler gets the first failure once");
        assertTrue(where.getFirst().startsWith(expectedWhere) && where.getFirst().contains("memory:"),
                where.toString());
    }

    @Test
    void theContextIsValidatedOnceAtBuild() {
        try (var store = KVStores.open("memory:?capacity=64MiB")) {
            KVException e = assertThrows(KVException.class,
                    () -> KVStoreConnector.builder(store, LAYOUT).errorHandler(null).build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("errorHandler=null"), e.getMessage());
        }
    }
}
