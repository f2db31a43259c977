package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.codec.Safetensors;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsWeightsTest {
    private static final ModelConfig TINY = ModelConfig.tiny(31);
    private static final ValueLayout.OfShort LE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @Test
    void savedThenLoadedWeightsGenerateTheSameTokens(@TempDir Path dir) {
        ModelWeights drawn = ModelWeights.random(TINY);
        Path file = dir.resolve("tiny.safetensors");
        long bytes = drawn.save(file);
        assertTrue(bytes > drawn.parameterCount() * Float.BYTES);
        ModelWeights loaded = ModelWeights.load(TINY, file);
        assertEquals(drawn.parameterCount(), loaded.parameterCount());
        int[] prompt = ByteTokenizer.encode("weights from a file");
        try (Engine a = Engine.builder(drawn).build(); Engine b = Engine.builder(loaded).build()) {
            assertArrayEquals(a.generate(prompt, 8).tokens(), b.generate(prompt, 8).tokens());
        }
    }

    @Test
    void aFileForAnotherConfigIsRefusedWithTheTensorNamed(@TempDir Path dir) {
        Path file = dir.resolve("tiny.safetensors");
        ModelWeights.random(TINY).save(file);
        ModelConfig deeper = new ModelConfig(3, 64, 4, 2, 16, 128, 256, 512, 10_000f, 1e-5f, 31);
        KVException missing = assertThrows(KVException.class, () -> ModelWeights.load(deeper, file));
        assertEquals(ErrorCode.CORRUPT_OBJECT, missing.code());
        assertTrue(missing.getMessage().contains("model.layers.2."), missing.getMessage());
        ModelConfig wider = new ModelConfig(2, 64, 4, 2, 16, 256, 256, 512, 10_000f, 1e-5f, 31);
        KVException shape = assertThrows(KVException.class, () -> ModelWeights.load(wider, file));
        assertEquals(ErrorCode.SHAPE_MISMATCH, shape.code());
        assertTrue(shape.getMessage().contains("mlp.gate_proj"), shape.getMessage());
    }

    @Test
    void garbageAndMissingFilesAreErrorsNotCrashes(@TempDir Path dir) throws Exception {
        Path junk = dir.resolve("junk.safetensors");
        Files.write(junk, new byte[] {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, 0, 0, 0, 0, '{', '}'});
        assertEquals(ErrorCode.CORRUPT_OBJECT, assertThrows(KVException.class, () -> ModelWeights.load(TINY, junk)).code());
        KVException io = assertThrows(KVException.class, () -> ModelWeights.load(TINY, dir.resolve("absent")));
        assertEquals(ErrorCode.IO_ERROR, io.code());
        assertTrue(io.getMessage().contains("absent"));
    }

    @Test
    void halfPrecisionFilesAreWidenedExactly(@TempDir Path dir) throws Exception {
        ModelWeights drawn = ModelWeights.random(TINY);
        for (DType dtype : new DType[] {DType.BF16, DType.FP16}) {
            Path file = dir.resolve(dtype + ".safetensors");
            Map<String, float[]> widened = new LinkedHashMap<>();
            try (Arena arena = Arena.ofConfined()) {
                Map<String, Tensor> tensors = new LinkedHashMap<>();
                for (var e : ModelWeights.shapes(TINY).entrySet()) {
                    float[] a = drawn.arrays().get(e.getKey());
                    MemorySegment seg = arena.allocate(2L * a.length, 8);
                    float[] back = new float[a.length];
                    for (int i = 0; i < a.length; i++) {
                        short half = dtype == DType.BF16 ? (short) (Float.floatToRawIntBits(a[i]) >>> 16)
                                : Float.floatToFloat16(a[i]);
                        seg.setAtIndex(LE16, i, half);
                        back[i] = dtype == DType.BF16 ? Float.intBitsToFloat((half & 0xFFFF) << 16)
                                : Float.float16ToFloat(half);
                    }
                    widened.put(e.getKey(), back);
                    tensors.put(e.getKey(), Tensor.host(TensorSpec.of(dtype, e.getValue()), seg));
                }
                MemorySegment out = arena.allocate(Safetensors.encodedSize(specs(tensors), Map.of()), 8);
                Safetensors.write(out, tensors, Map.of());
                Files.write(file, out.toArray(ValueLayout.JAVA_BYTE));
            }
            Map<String, float[]> loaded = ModelWeights.load(TINY, file).arrays();
            for (var e : widened.entrySet()) {
                assertArrayEquals(e.getValue(), loaded.get(e.getKey()), dtype + " " + e.getKey());
            }
        }
    }

    private static Map<String, TensorSpec> specs(Map<String, Tensor> tensors) {
        Map<String, TensorSpec> m = new LinkedHashMap<>();
        tensors.forEach((k, v) -> m.put(k, v.spec()));
        return m;
    }
}
