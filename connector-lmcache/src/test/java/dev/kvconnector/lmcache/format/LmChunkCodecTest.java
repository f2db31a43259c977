package dev.kvconnector.lmcache.format;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class LmChunkCodecTest {
    private static final KVLayout MHA = new KVLayout("t", AttentionKind.MHA, 3, 2, 8, DType.BF16, 4, 16);
    private static final KVLayout MLA = new KVLayout("m", AttentionKind.MLA, 2, 1, 12, DType.BF16, 4, 16);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Two chunks, of 8 and 5 tokens, under made-up keys. */
    private static KeyPlan keys() {
        return new KeyPlan("test", Granularity.CHUNK, List.of(
                new ChunkKeys(0, 0, 8, "00", new String[] {"k0"}, null, null),
                new ChunkKeys(1, 8, 13, "01", new String[] {"k1"}, null, null)));
    }

    private static MemorySegment random(Arena arena, long bytes, long seed) {
        Random r = new Random(seed);
        MemorySegment s = arena.allocate(bytes);
        for (long i = 0; i < bytes; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        return s;
    }

    /**
     * Writes every layer's tensors where the codec's placements say, head row by head row, and checks that the
     * object is exactly what {@link LmChunkFormat#pack} writes behind the metadata, and the metadata is LMCache's.
     */
    @ParameterizedTest
    @EnumSource(LmChunkFormat.class)
    void placementsPutEveryHeadRowWherePackDoes(LmChunkFormat format) {
        KVLayout layout = format == LmChunkFormat.V1_KV_MLA ? MLA : MHA;
        LmChunkCodec codec = LmChunkCodec.of(format);
        ObjectPlan plan = codec.plan(keys(), layout, true);
        assertEquals(Completion.PER_CHUNK, plan.completion());
        try (Arena arena = Arena.ofConfined()) {
            for (int c = 0; c < 2; c++) {
                int tokens = c == 0 ? 8 : 5;
                LmChunkGeometry g = new LmChunkGeometry(layout.numLayers(), tokens, layout.kvHeads(),
                        layout.headSize(), 2);
                MemorySegment[] k = new MemorySegment[g.layers()];
                MemorySegment[] v = new MemorySegment[g.layers()];
                MemorySegment object = arena.allocate(plan.layerObjectBytes(c, 0));
                for (int l = 0; l < g.layers(); l++) {
                    k[l] = random(arena, g.tensorBytes(), 10L * l + c);
                    v[l] = random(arena, g.tensorBytes(), 10L * l + c + 5);
                    for (int t = 0; t < format.tensorsPerLayer(); t++) {
                        MemorySegment src = t == 0 ? k[l] : v[l];
                        TensorPlacement p = plan.placement(c, l, t);
                        assertEquals(format.tokenMajor(), p.isContiguous());
                        for (int tok = 0; tok < tokens; tok++) {
                            for (int h = 0; h < p.heads(); h++) {
                                MemorySegment.copy(src, (tok * (long) p.heads() + h) * p.headBytes(), object,
                                        p.offset() + tok * p.tokenStride() + h * p.headStride(), p.headBytes());
                            }
                        }
                    }
                }
                plan.seal(c, layout.numLayers() - 1, object);
                int meta = codec.metadataBytes();
                MemorySegment packed = arena.allocate(format.chunkBytes(g));
                format.pack(k, v, 0, g, packed);
                assertEquals(meta + format.chunkBytes(g), object.byteSize());
                assertEquals(-1, object.asSlice(meta).mismatch(packed), format + " chunk " + c);
                if (meta > 0) {
                    long[] shape = format.shape(g);
                    assertEquals(LmRemoteMetadata.of((int) format.chunkBytes(g), format.memoryFormat(), 3,
                            (int) shape[0], (int) shape[1], (int) shape[2], (int) shape[3]),
                            LmRemoteMetadata.decode(object, 0, 1));
                }
                assertEquals(ObjectPlan.OK, plan.validate(c, 0, object, object.byteSize()));
            }
        }
    }

    @Test
    void validationNamesWrongSizeOtherLayoutAndUnreadableMetadata() {
        ObjectPlan plan = LmChunkCodec.of(LmChunkFormat.V1_KV_2LTD).plan(keys(), MHA, false);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(plan.layerObjectBytes(0, 0));
            plan.seal(0, 0, object);
            assertEquals(ObjectPlan.OK, plan.validate(0, 0, object, object.byteSize()));
            int truncated = plan.validate(0, 0, object, object.byteSize() - 1);
            assertEquals(LmChunkCodec.WRONG_SIZE, truncated);
            assertTrue(plan.isLayoutMismatch(truncated));
            object.set(INT, 4, 2);
            int otherFormat = plan.validate(0, 0, object, object.byteSize());
            assertEquals(LmChunkCodec.OTHER_LAYOUT, otherFormat);
            assertTrue(plan.describe(otherFormat).contains("another format"), plan.describe(otherFormat));
            plan.seal(0, 0, object);
            object.set(INT, 8, 99);
            int unreadable = plan.validate(0, 0, object, object.byteSize());
            assertEquals(LmChunkCodec.UNREADABLE_METADATA, unreadable);
            assertFalse(plan.isLayoutMismatch(unreadable), "a dtype number outside 0..8 is corrupt");
            plan.seal(0, 0, object);
            object.set(INT, 8, 1);
            assertEquals(LmChunkCodec.OTHER_LAYOUT, plan.validate(0, 0, object, object.byteSize()),
                    "1 is float16, and this layout is bfloat16");
            KVLayout fp16 = new KVLayout("h", AttentionKind.MHA, 3, 2, 8, DType.FP16, 4, 16);
            ObjectPlan half = LmChunkCodec.of(LmChunkFormat.V1_KV_2LTD).plan(keys(), fp16, false);
            half.seal(0, 0, object);
            assertEquals(2, object.get(INT, 8), "float16 is written as 2, as LMCache writes it");
            object.set(INT, 8, 1);
            assertEquals(ObjectPlan.OK, half.validate(0, 0, object, object.byteSize()),
                    "LMCache's dtype numbers 1 and 2 both mean float16");
        }
    }

    @Test
    void aFormatThatDoesNotFitTheLayoutIsRefusedAndNoHiddenStatesArePlanned() {
        KVException mla = assertThrows(KVException.class,
                () -> LmChunkCodec.of(LmChunkFormat.V1_KV_MLA).plan(keys(), MHA, false));
        assertEquals(ErrorCode.INVALID_ARGUMENT, mla.code());
        KVException mha = assertThrows(KVException.class,
                () -> LmChunkCodec.of(LmChunkFormat.V0_VLLM).plan(keys(), MLA, false));
        assertEquals(ErrorCode.INVALID_ARGUMENT, mha.code());
        ObjectPlan plan = LmChunkCodec.of(LmChunkFormat.V0_VLLM).plan(keys(), MHA, false);
        assertEquals(null, plan.hiddenKey(0));
    }

    @Test
    void v1ObjectsAreRefusedOverAPlainLmStoreAnd2024ObjectsOverTheV1Layouts() {
        LmChunkCodec v1 = LmChunkCodec.of(LmChunkFormat.V1_KV_2LTD);
        KVException lm = assertThrows(KVException.class, () -> v1.requireStore("lm://127.0.0.1:65432"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, lm.code());
        assertTrue(lm.getMessage().contains("lmcache+lm://"), lm.getMessage());
        v1.requireStore("lmcache+lm://127.0.0.1:65432");
        v1.requireStore("memory:");
        LmChunkCodec v0 = LmChunkCodec.of(LmChunkFormat.V0_VLLM);
        v0.requireStore("lm://127.0.0.1:65432");
        KVException layout = assertThrows(KVException.class, () -> v0.requireStore("lmcache+valkey://127.0.0.1:6379"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, layout.code());
        assertTrue(layout.getMessage().contains("RemoteMetadata"), layout.getMessage());
    }
}
