package dev.kvconnector.mooncake.p2p;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.te.TeTestTarget;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The connector contract's MLA case over the peer-to-peer path: one latent per layer, every byte. */
class P2pMlaTest {
    private static final KVLayout MLA = new KVLayout("test-mla", AttentionKind.MLA, 3, 1, 48, DType.BF16, 16, 24);
    private static final int TOKENS = 40;

    @Test
    void mlaLayoutMovesOneLatentPerLayerEveryByte() {
        String uri = TeTestTarget.require().uri();
        BlockTable pBlocks = new BlockTable(new int[] {5, 2, 9}, 16, TOKENS);
        BlockTable dBlocks = new BlockTable(IntStream.range(3, 6).toArray(), 16, TOKENS);
        try (PagedKVCache pCache = PagedKVCache.allocate(MLA, 12); PagedKVCache dCache = PagedKVCache.allocate(MLA, 12);
             TransferEngineConnector d = TransferEngineConnector.builder(uri, MLA).registerCache(dCache)
                     .layerTimeoutMillis(3000).stagingBytes(1L << 20).build();
             TransferEngineConnector p = TransferEngineConnector.builder(uri, MLA).stagingBytes(1L << 20).build();
             Arena arena = Arena.ofConfined()) {
            long bytes = TOKENS * MLA.bytesPerTokenPerTensor();
            for (int l = 0; l < MLA.numLayers(); l++) {
                pCache.scatter(Segments.random(arena, bytes, 70 + l), 0, l, 0, pBlocks, 0, TOKENS);
            }
            RequestTokens request = RequestTokens.of(new int[TOKENS]).inNamespace("t-mla");
            DropResult r;
            try (P2pDropSession drop = d.beginDropSelect(request, DropTarget.paged(dCache, dBlocks))) {
                try (InsertSession insert = p.beginInsert(request, drop.transferParams())) {
                    for (int l = 0; l < MLA.numLayers(); l++) {
                        insert.putLayer(l, pCache, pBlocks);
                    }
                    insert.commit();
                }
                r = drop.result();
            }
            assertTrue(r.isComplete(), r::toString);
            MemorySegment got = arena.allocate(bytes);
            for (int l = 0; l < MLA.numLayers(); l++) {
                dCache.gather(l, 0, dBlocks, 0, TOKENS, got, 0);
                assertTrue(Segments.equal(Segments.random(arena, bytes, 70 + l), got, bytes), "layer " + l);
            }
            assertEquals(MLA.numLayers() * MLA.layerBytes(TOKENS), d.metrics().droppedBytes());
        }
    }
}
