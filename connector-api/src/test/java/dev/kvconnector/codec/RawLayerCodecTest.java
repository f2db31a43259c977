package dev.kvconnector.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class RawLayerCodecTest {
    private final KVLayout layout = KVLayout.preset("qwen2.5-0.5b");

    private ObjectPlan plan(int tokens) {
        int[] ids = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            ids[i] = 7 + i;
        }
        var keys = KeySchemes.byName(KeySchemes.DEFAULT).plan(KeyContext.of("m", layout), RequestTokens.of(ids));
        return RawLayerCodec.INSTANCE.plan(keys, layout, true);
    }

    @Test
    void placesKThenVContiguouslyAfterTheHeaderAndSizesTheLastChunkToItsTokens() {
        ObjectPlan p = plan(300);
        assertEquals(2, p.chunks());
        assertEquals(Completion.PER_LAYER, p.completion());
        long tb = layout.bytesPerTokenPerTensor();
        TensorPlacement v = p.placement(1, 3, 1);
        assertTrue(v.isContiguous());
        assertEquals(44, v.tokens());
        assertEquals(RawTensorFormat.HEADER_BYTES + 44 * tb, v.offset());
        assertEquals(RawTensorFormat.HEADER_BYTES + 2 * 44 * tb, p.layerObjectBytes(1, 3));
        assertEquals(p.keys().chunks().get(1).layerKeys()[3], p.layerKey(1, 3));
    }

    @Test
    void aSealedObjectValidatesAndAFlippedPayloadByteIsCorrupt() {
        ObjectPlan p = plan(256);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment o = arena.allocate(p.layerObjectBytes(0, 0));
            o.asSlice(RawTensorFormat.HEADER_BYTES).fill((byte) 9);
            p.seal(0, 0, o);
            assertEquals(ObjectPlan.OK, p.validate(0, 0, o, o.byteSize()));
            long at = p.placement(0, 0, 1).offset() + 5;
            o.set(ValueLayout.JAVA_BYTE, at, (byte) 8);
            int status = p.validate(0, 0, o, o.byteSize());
            assertEquals(RawTensorFormat.BAD_PAYLOAD_SUM, status);
            assertTrue(p.describe(status).contains("checksum"), p.describe(status));
            MemorySegment h = arena.allocate(p.hiddenObjectBytes(0, DType.BF16));
            p.sealHidden(0, DType.BF16, h);
            assertEquals(ObjectPlan.OK, p.validateHidden(0, DType.BF16, h, h.byteSize()));
            assertTrue(p.isLayoutMismatch(p.validateHidden(0, DType.FP32, h, h.byteSize())));
        }
    }

    @Test
    void aKeySchemeOfAnotherGranularityIsRefusedNamingBoth() {
        KVException e = assertThrows(KVException.class, () -> ObjectCodec.requirePair(
                KeySchemes.byName(VllmV1KeyScheme.NAME), RawLayerCodec.INSTANCE));
        assertEquals(ErrorCode.UNSUPPORTED, e.code());
        assertTrue(e.getMessage().contains(VllmV1KeyScheme.NAME) && e.getMessage().contains(RawLayerCodec.NAME),
                e.getMessage());
        ObjectCodec.requirePair(KeySchemes.byName(KeySchemes.DEFAULT), RawLayerCodec.INSTANCE);
    }
}
