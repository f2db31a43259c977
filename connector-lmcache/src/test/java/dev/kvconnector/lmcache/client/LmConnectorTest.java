package dev.kvconnector.lmcache.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import org.junit.jupiter.api.Test;

/** The connector over an LMCache server, which cannot delete: retained entries serve prefix reuse. */
class LmConnectorTest {
    private static final KVLayout LAYOUT = new KVLayout("lm", AttentionKind.MHA, 2, 2, 8, DType.BF16, 16, 8);

    @Test
    void twoConsumersReuseOneRetainedEntryAndConsumeModeKeepsWorking() {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).capacityBytes(32L << 20).build()
                .start();
        try (Arena arena = Arena.ofConfined();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?protocol=v1");
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16)
                     .dropMode(DropMode.RETAIN).build()) {
            TensorSpec spec = TensorSpec.of(DType.BF16, 40, 2, 8);
            Tensor[][] layers = new Tensor[2][2];
            Tensor[][] got = new Tensor[2][2];
            for (int l = 0; l < 2; l++) {
                for (int t = 0; t < 2; t++) {
                    layers[l][t] = Tensor.host(spec, Segments.random(arena, spec.byteSize(), l * 2 + t));
                    got[l][t] = Tensor.host(spec, arena.allocate(spec.byteSize()));
                }
            }
            int[] tokens = new int[40];
            for (int i = 0; i < 40; i++) {
                tokens[i] = i * 7;
            }
            RequestTokens req = RequestTokens.of(tokens);
            try (InsertSession s = kv.beginInsert(req)) {
                s.putLayer(0, layers[0]);
                s.putLayer(1, layers[1]);
                s.commit();
            }
            assertEquals(40, kv.lookup(req));
            assertTrue(kv.dropSelect(req, DropTarget.contiguous(got)).isComplete());
            DropResult second = kv.dropSelect(req, DropTarget.contiguous(got), DropMode.CONSUME);
            assertTrue(second.isComplete(), second.toString());
            assertEquals(40, kv.lookup(req), "an LMCache server cannot delete, so the entry stays for reuse");
            for (int l = 0; l < 2; l++) {
                for (int t = 0; t < 2; t++) {
                    assertEquals(-1, layers[l][t].segment().mismatch(got[l][t].segment()));
                }
            }
        } finally {
            server.stop();
        }
    }
}
