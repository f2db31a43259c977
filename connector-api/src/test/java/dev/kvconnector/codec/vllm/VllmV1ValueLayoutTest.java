package dev.kvconnector.codec.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.codec.vllm.VllmV1ValueLayout.TokenOrder;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class VllmV1ValueLayoutTest {
    /** Llama-3.1-8B over TP 4: 32 layers, 2 KV heads per rank, head size 128, BF16, 16-token blocks. */
    private static final KVLayout LLAMA_TP4 = KVLayout.preset("llama3-8b").perRank(4);
    private static final KVLayout DEEPSEEK = KVLayout.preset("deepseek-v3-mla");

    @Test
    void flashAttentionObjectsHoldKThenVPerLayer() {
        VllmV1ValueLayout v = new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.NHD);
        assertEquals(16L * 2 * 128 * 2, v.segmentBytes());
        assertEquals(32L * 2 * 8192, v.objectBytes());
        assertEquals(0, v.keyOffset(0));
        assertEquals(8192, v.valueOffset(0));
        assertEquals(16384, v.keyOffset(1));
        assertEquals(24576, v.valueOffset(1));
        assertEquals(v.objectBytes() - v.segmentBytes(), v.valueOffset(31));
    }

    @Test
    void mlaObjectsHoldOneLatentPerLayerAndNoKOrV() {
        VllmV1ValueLayout v = new VllmV1ValueLayout(DEEPSEEK, TokenOrder.NHD);
        assertEquals(16L * 576 * 2, v.segmentBytes());
        assertEquals(61L * 18432, v.objectBytes());
        assertEquals(2 * 18432, v.latentOffset(2));
        KVException e = assertThrows(KVException.class, () -> v.keyOffset(0));
        assertTrue(e.getMessage().contains("MLA layout has no K"), e.getMessage());
        assertThrows(KVException.class, () -> new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.NHD).latentOffset(0));
    }

    @Test
    void nhdAndHndPlaceTheSameElementDifferently() {
        VllmV1ValueLayout nhd = new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.NHD);
        VllmV1ValueLayout hnd = new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.HND);
        long vBase = nhd.valueOffset(1);
        assertEquals(vBase + ((3 * 2 + 1) * 128 + 5) * 2, nhd.elementOffset(1, VllmV1ValueLayout.VALUE, 3, 1, 5));
        assertEquals(vBase + ((1 * 16 + 3) * 128 + 5) * 2, hnd.elementOffset(1, VllmV1ValueLayout.VALUE, 3, 1, 5));
    }

    @Test
    void aValueOfTheWrongSizeIsDetectedWithBothSizesInTheReason() {
        VllmV1ValueLayout v = new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.NHD);
        assertTrue(v.fits(524288));
        assertNull(v.sizeMismatch(524288));
        VllmV1ValueLayout fp8 = new VllmV1ValueLayout(LLAMA_TP4.withDtype(DType.FP8_E4M3), TokenOrder.NHD);
        for (long wrong : new long[] {0, 524287, 524289, fp8.objectBytes()}) {
            assertFalse(v.fits(wrong), wrong + " bytes");
            String reason = v.sizeMismatch(wrong);
            assertTrue(reason.contains(wrong + " bytes") && reason.contains("524288 bytes"), reason);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment truncated = arena.allocate(v.objectBytes() - v.segmentBytes());
            KVException e = assertThrows(KVException.class, () -> v.segment(truncated, 0, VllmV1ValueLayout.KEY));
            assertEquals(ErrorCode.SHAPE_MISMATCH, e.code());
            assertTrue(e.getMessage().contains("516096 bytes"), e.getMessage());
        }
    }

    @Test
    void anIndexOutOfRangeNamesTheIndexAndTheCount() {
        VllmV1ValueLayout v = new VllmV1ValueLayout(LLAMA_TP4, TokenOrder.NHD);
        assertEquals("layer=32 count=32", assertThrows(IndexOutOfBoundsException.class, () -> v.keyOffset(32)).getMessage());
        assertEquals("head=2 count=2", assertThrows(IndexOutOfBoundsException.class,
                () -> v.elementOffset(0, 0, 0, 2, 0)).getMessage());
        assertEquals("segment=2 count=2", assertThrows(IndexOutOfBoundsException.class,
                () -> v.segmentOffset(0, 2)).getMessage());
    }

    /**
     * Builds block {@code b}'s object the way vLLM V1's worker does from FlashAttention caches of shape
     * {@code (2, num_blocks, block_size, heads, head_size)}: per layer, the K plane's block then the V plane's block,
     * each {@code stride(0)}-split segment's {@code b}-th block copied back to back. Every element must then be where
     * {@link VllmV1ValueLayout#elementOffset} says.
     */
    @Test
    void theObjectOfABlockIsTheConcatenationOfEachLayersKAndVBlocksOfTheFlashAttentionCache() {
        KVLayout small = new KVLayout("small", AttentionKind.MHA, 3, 2, 4, DType.FP16, 4, 0);
        VllmV1ValueLayout v = new VllmV1ValueLayout(small, TokenOrder.NHD);
        int numBlocks = 5;
        int block = 3;
        long blockBytes = v.segmentBytes();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] caches = new MemorySegment[small.numLayers()];
            for (int layer = 0; layer < caches.length; layer++) {
                caches[layer] = arena.allocate(2 * numBlocks * blockBytes);
                for (long i = 0; i < caches[layer].byteSize() / 2; i++) {
                    caches[layer].setAtIndex(ValueLayout.JAVA_SHORT, i, (short) (layer * 10_000 + i));
                }
            }
            MemorySegment object = arena.allocate(v.objectBytes());
            long at = 0;
            for (MemorySegment cache : caches) {
                for (int kv = 0; kv < 2; kv++) {
                    long plane = kv * numBlocks * blockBytes;
                    MemorySegment.copy(cache, plane + block * blockBytes, object, at, blockBytes);
                    at += blockBytes;
                }
            }
            assertEquals(v.objectBytes(), at);
            for (int layer = 0; layer < small.numLayers(); layer++) {
                for (int kv = 0; kv < 2; kv++) {
                    for (int t = 0; t < small.blockSize(); t++) {
                        for (int h = 0; h < small.kvHeads(); h++) {
                            for (int d = 0; d < small.headSize(); d++) {
                                long index = (((long) (kv * numBlocks + block) * small.blockSize() + t) * small.kvHeads() + h)
                                        * small.headSize() + d;
                                short expected = caches[layer].getAtIndex(ValueLayout.JAVA_SHORT, index);
                                assertEquals(expected, object.get(ValueLayout.JAVA_SHORT_UNALIGNED,
                                        v.elementOffset(layer, kv, t, h, d)), "layer " + layer + " kv " + kv + " t " + t);
                            }
                        }
                    }
                }
                assertEquals(v.segmentOffset(layer, 1), v.segment(object, layer, 1).address() - object.address());
            }
        }
    }
}
