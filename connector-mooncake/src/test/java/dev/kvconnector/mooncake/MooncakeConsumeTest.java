package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A consuming drop-select over Mooncake with the default {@code lease-policy=wait}. Each get grants the reader a
 * lease ({@code default_kv_lease_ttl}: 10 s on a real master, 300 ms in the double under test), and a plain remove
 * waits it out. The consumer's removal of what it just read must not: the store here may wait only 20 ms, so a
 * removal that waited for the lease would fail with BUSY instead of completing the drop-select.
 */
class MooncakeConsumeTest {
    private static final long LEASE_MS = Long.parseLong(System.getenv().getOrDefault("MOONCAKE_DOUBLE_LEASE_MS", "10000"));
    private static final KVLayout LAYOUT = new KVLayout("test-mha", AttentionKind.MHA, 3, 2, 16, DType.BF16, 16, 32);

    @Test
    void consumingDropSelectRemovesWhatItReadWithoutWaitingOutItsOwnLease() {
        assumeTrue(LEASE_MS >= 200, "needs a lease longer than lease-wait");
        MooncakeTestTarget target = MooncakeTestTarget.require();
        int tokens = 64;
        TensorSpec spec = TensorSpec.of(LAYOUT.dtype(), tokens, LAYOUT.kvHeads(), LAYOUT.headSize());
        try (Arena arena = Arena.ofShared();
             MooncakeStore store = target.open("&lease-wait=20ms");
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).modelId("test/consume").chunkTokens(32)
                     .dropMode(DropMode.CONSUME).stagingBytes(16L << 20).build()) {
            RequestTokens req = RequestTokens.of(new int[tokens]).inNamespace(MooncakeTestTarget.uniquePrefix());
            Tensor[][] written = new Tensor[LAYOUT.numLayers()][2];
            Tensor[][] read = new Tensor[LAYOUT.numLayers()][2];
            try (InsertSession insert = kv.beginInsert(req)) {
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    for (int t = 0; t < 2; t++) {
                        written[l][t] = Tensor.host(spec, Segments.random(arena, spec.byteSize(), l * 2L + t));
                        read[l][t] = Tensor.host(spec, arena.allocate(spec.byteSize()));
                    }
                    insert.putLayer(l, written[l]);
                }
                insert.commit();
            }

            DropResult r = kv.dropSelect(req, DropTarget.contiguous(read));

            assertTrue(r.isComplete(), r.toString());
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < 2; t++) {
                    assertEquals(-1, written[l][t].segment().mismatch(read[l][t].segment()), "layer " + l);
                }
            }
            List<ChunkKeys> chunks = KeySchemes.byName(KeySchemes.DEFAULT).plan(kv.keyContext(), req).chunks();
            assertEquals(2, chunks.size());
            for (ChunkKeys c : chunks) {
                assertFalse(store.exists(c.manifestKey()), c.manifestKey() + " was not consumed");
                for (String layerKey : c.layerKeys()) {
                    assertFalse(store.exists(layerKey), layerKey + " was not consumed");
                }
            }
            assertFalse(kv.dropSelect(req, DropTarget.contiguous(read)).isHit());
        }
    }
}
