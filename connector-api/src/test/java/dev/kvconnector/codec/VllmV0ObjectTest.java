package dev.kvconnector.codec;

import static dev.kvconnector.codec.CodecTestSupport.fillPattern;
import static dev.kvconnector.codec.CodecTestSupport.fromHex;
import static dev.kvconnector.codec.CodecTestSupport.hasPattern;
import static dev.kvconnector.codec.CodecTestSupport.toHex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class VllmV0ObjectTest {
    /*
     * Written by a Python generator that follows safetensors.torch.save({"tensor": t, "device_id":
     * torch.tensor(d, dtype=torch.int32)}): compact JSON, the reference writer's sort (descending dtype alignment,
     * then name), space padding to 8 bytes. The tensor data follow the pattern (i * 37 + seed).
     */
    /** BF16 [2, L=1, T=3, H=1, D=4] KV, device 0, seed 11: device_id sorts first (I32 aligns more than BF16). */
    static final String V0_BF16_KV_DEVICE_0 = "88000000000000007b226465766963655f6964223a7b226474797065223a2249"
            + "3332222c227368617065223a5b5d2c22646174615f6f666673657473223a5b302c345d7d2c2274656e736f72223a7b2264747970"
            + "65223a2242463136222c227368617065223a5b322c312c332c312c345d2c22646174615f6f666673657473223a5b342c35325d7d"
            + "7d20202020202020000000000b30557a9fc4e90e33587da2c7ec11365b80a5caef14395e83a8cdf2173c6186abd0f51a3f6489ae"
            + "d3f81d42678cb1d6";
    /** F32 [T=3, hidden=8] hidden states from a CPU tensor (device -1), seed 5: tensor sorts first. */
    static final String V0_F32_HIDDEN_CPU = "80000000000000007b2274656e736f72223a7b226474797065223a2246333222"
            + "2c227368617065223a5b332c385d2c22646174615f6f666673657473223a5b302c39365d7d2c226465766963655f6964223a7b22"
            + "6474797065223a22493332222c227368617065223a5b5d2c22646174615f6f666673657473223a5b39362c3130305d7d7d202020"
            + "052a4f7499bee3082d52779cc1e60b30557a9fc4e90e33587da2c7ec11365b80a5caef14395e83a8cdf2173c6186abd0f51a3f64"
            + "89aed3f81d42678cb1d6fb20456a8fb4d9fe23486d92b7dc01264b7095badf04294e7398bde2072c51769bc0ffffffff";
    /** F8_E4M3 [2, 2, 2, 1, 8] KV, device 7, seed 3. */
    static final String V0_FP8_KV_DEVICE_7 = "88000000000000007b226465766963655f6964223a7b226474797065223a2249"
            + "3332222c227368617065223a5b5d2c22646174615f6f666673657473223a5b302c345d7d2c2274656e736f72223a7b2264747970"
            + "65223a2246385f45344d33222c227368617065223a5b322c322c322c312c385d2c22646174615f6f666673657473223a5b342c36"
            + "385d7d7d202020200700000003284d7297bce1062b50759abfe4092e53789dc2e70c31567ba0c5ea0f34597ea3c8ed12375c81a6"
            + "cbf0153a5f84a9cef3183d6287acd1f61b40658aafd4f91e";
    /** I32 [5], device 3, seed 1: equal dtypes sort by name, so device_id first. */
    static final String V0_I32_DEVICE_3 = "78000000000000007b226465766963655f6964223a7b226474797065223a2249"
            + "3332222c227368617065223a5b5d2c22646174615f6f666673657473223a5b302c345d7d2c2274656e736f72223a7b2264747970"
            + "65223a22493332222c227368617065223a5b355d2c22646174615f6f666673657473223a5b342c32345d7d7d0300000001264b70"
            + "95badf04294e7398bde2072c51769bc0";

    private record Fixture(String hex, TensorSpec spec, int deviceId, int seed, List<String> order) {
    }

    private static final List<Fixture> FIXTURES = List.of(
            new Fixture(V0_BF16_KV_DEVICE_0, TensorSpec.of(DType.BF16, 2, 1, 3, 1, 4), 0, 11,
                    List.of("device_id", "tensor")),
            new Fixture(V0_F32_HIDDEN_CPU, TensorSpec.of(DType.FP32, 3, 8), -1, 5, List.of("tensor", "device_id")),
            new Fixture(V0_FP8_KV_DEVICE_7, TensorSpec.of(DType.FP8_E4M3, 2, 2, 2, 1, 8), 7, 3,
                    List.of("device_id", "tensor")),
            new Fixture(V0_I32_DEVICE_3, TensorSpec.of(DType.INT32, 5), 3, 1, List.of("device_id", "tensor")));

    @Test
    void decodeReadsPythonWrittenValues() {
        try (Arena arena = Arena.ofConfined()) {
            for (Fixture f : FIXTURES) {
                MemorySegment obj = fromHex(arena, f.hex());
                VllmV0Object v = VllmV0Object.decode(obj);
                assertEquals(f.spec(), v.tensor().spec());
                assertEquals(f.deviceId(), v.deviceId());
                assertTrue(hasPattern(v.tensor().segment(), f.seed()), f.spec().toString());
                assertEquals(f.order(), Safetensors.read(obj).names());
            }
        }
    }

    @Test
    void encodeWritesExactlyThePythonBytes() {
        try (Arena arena = Arena.ofConfined()) {
            for (Fixture f : FIXTURES) {
                MemorySegment src = arena.allocate(f.spec().byteSize());
                fillPattern(src, f.seed());
                MemorySegment obj = arena.allocate(VllmV0Object.encodedSize(f.spec()));
                assertEquals(obj.byteSize(), VllmV0Object.encode(obj, Tensor.host(f.spec(), src), f.deviceId()));
                assertEquals(f.hex(), toHex(obj), f.spec().toString());
            }
        }
    }

    @Test
    void prepareLetsTheProducerGatherInPlace() {
        try (Arena arena = Arena.ofConfined()) {
            Fixture f = FIXTURES.getFirst();
            SafetensorsLayout layout = VllmV0Object.layout(f.spec());
            MemorySegment obj = arena.allocate(layout.encodedSize());
            MemorySegment slot = VllmV0Object.prepare(obj, layout, f.deviceId());
            fillPattern(slot, f.seed());
            assertEquals(f.hex(), toHex(obj));
            assertEquals(obj.address() + layout.dataOffset(VllmV0Object.TENSOR), slot.address());
        }
    }

    private static MemorySegment write(Arena arena, Map<String, TensorSpec> specs) {
        SafetensorsLayout layout = Safetensors.layout(specs, Map.of());
        MemorySegment obj = arena.allocate(layout.encodedSize());
        layout.writeHeader(obj);
        return obj;
    }

    private static void assertCorrupt(MemorySegment obj, String fragment) {
        KVException e = assertThrows(KVException.class, () -> VllmV0Object.decode(obj));
        assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
        assertTrue(e.getMessage().contains(fragment), e.getMessage());
    }

    @Test
    void aValueWithoutTensorOrDeviceIdIsCorrupt() {
        try (Arena arena = Arena.ofConfined()) {
            assertCorrupt(write(arena, Map.of("device_id", TensorSpec.of(DType.INT32))), "lacks 'tensor'");
            assertCorrupt(write(arena, Map.of("tensor", TensorSpec.of(DType.BF16, 4))), "lacks 'device_id'");
            assertCorrupt(write(arena, Map.of("value", TensorSpec.of(DType.BF16, 4),
                    "device_id", TensorSpec.of(DType.INT32))), "lacks 'tensor'");
        }
    }

    @Test
    void aDeviceIdOfAnotherDtypeOrShapeIsCorrupt() {
        try (Arena arena = Arena.ofConfined()) {
            for (TensorSpec bad : List.of(TensorSpec.of(DType.INT64), TensorSpec.of(DType.FP32),
                    TensorSpec.of(DType.INT32, 1), TensorSpec.of(DType.INT32, 2))) {
                assertCorrupt(write(arena, Map.of("tensor", TensorSpec.of(DType.BF16, 4), "device_id", bad)),
                        "device_id " + bad);
            }
        }
    }

    @Test
    void bytesThatAreNotSafetensorsAreCorrupt() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = fromHex(arena, V0_BF16_KV_DEVICE_0);
            assertCorrupt(obj.asSlice(0, obj.byteSize() - 1), "run past the data buffer");
            assertCorrupt(obj.asSlice(0, 4), "shorter than the 8-byte header length");
        }
    }

    @Test
    void extraEntriesAreToleratedAsVllmDoes() {
        try (Arena arena = Arena.ofConfined()) {
            Map<String, TensorSpec> specs = new LinkedHashMap<>();
            specs.put("tensor", TensorSpec.of(DType.FP16, 2, 2));
            specs.put("device_id", TensorSpec.of(DType.INT32));
            specs.put("note", TensorSpec.of(DType.UINT8, 3));
            MemorySegment obj = write(arena, specs);
            VllmV0Object v = VllmV0Object.decode(obj);
            assertEquals(TensorSpec.of(DType.FP16, 2, 2), v.tensor().spec());
            assertEquals(0, v.deviceId());
        }
    }
}
