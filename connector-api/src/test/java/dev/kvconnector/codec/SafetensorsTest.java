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
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SafetensorsTest {
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /**
     * The reference implementation's own serialization test vectors ({@code test_serialization},
     * {@code test_serialization_forced_alignement} and {@code test_empty} in the safetensors crate), which our
     * Python generator reproduces: tensor "attn.0" F32[1,2,3] holding 0..5; "attn0" F32[1,1,2,3]; and no tensors
     * with metadata {"framework": "pt"}.
     */
    static final String REFERENCE_ATTN_0 = "40000000000000007b226174746e2e30223a7b226474797065223a2246333222"
            + "2c227368617065223a5b312c322c335d2c22646174615f6f666673657473223a5b302c32345d7d7d000000000000803f00000040"
            + "00004040000080400000a040";
    static final String REFERENCE_ATTN0_PADDED = "48000000000000007b226174746e30223a7b226474797065223a22463332222c"
            + "227368617065223a5b312c312c322c335d2c22646174615f6f666673657473223a5b302c32345d7d7d2020202020202000000000"
            + "0000803f0000004000004040000080400000a040";
    static final String REFERENCE_EMPTY_WITH_METADATA = "28000000000000007b225f5f6d657461646174615f5f223a7b226672616d6577"
            + "6f726b223a227074227d7d2020202020";
    static final String REFERENCE_EMPTY = "08000000000000007b7d202020202020";

    /**
     * Written by the Python generator (json.dumps compact, the reference's sort, space padding): tensors
     * "b" F16[2,3], "a" F16[1], "é" U8[3], "z\n\"q" I64[2], "A" F64[], "Z" U8[0], metadata {"format": "pt"}.
     * Data of each tensor follow the pattern (i * 37 + seed), seeds 1..6 in that order.
     */
    static final String PYTHON_MIXED = "70010000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174"
            + "223a227074227d2c227a5c6e5c2271223a7b226474797065223a22493634222c227368617065223a5b325d2c22646174615f6f66"
            + "6673657473223a5b302c31365d7d2c2241223a7b226474797065223a22463634222c227368617065223a5b5d2c22646174615f6f"
            + "666673657473223a5b31362c32345d7d2c2261223a7b226474797065223a22463136222c227368617065223a5b315d2c22646174"
            + "615f6f666673657473223a5b32342c32365d7d2c2262223a7b226474797065223a22463136222c227368617065223a5b322c335d"
            + "2c22646174615f6f666673657473223a5b32362c33385d7d2c225a223a7b226474797065223a225538222c227368617065223a5b"
            + "305d2c22646174615f6f666673657473223a5b33382c33385d7d2c22c3a9223a7b226474797065223a225538222c227368617065"
            + "223a5b335d2c22646174615f6f666673657473223a5b33382c34315d7d7d202004294e7398bde2072c51769bc0e50a2f052a4f74"
            + "99bee308022701264b7095badf04294e739803284d";

    @Test
    void writerReproducesTheReferenceImplementationsTestVectors() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(24);
            for (int i = 0; i < 6; i++) {
                data.set(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4L * i, i);
            }
            assertEquals(REFERENCE_ATTN_0, encode(arena, Map.of("attn.0",
                    Tensor.host(TensorSpec.of(DType.FP32, 1, 2, 3), data)), Map.of()));
            assertEquals(REFERENCE_ATTN0_PADDED, encode(arena, Map.of("attn0",
                    Tensor.host(TensorSpec.of(DType.FP32, 1, 1, 2, 3), data)), Map.of()));
            assertEquals(REFERENCE_EMPTY_WITH_METADATA, encode(arena, Map.of(), Map.of("framework", "pt")));
            assertEquals(REFERENCE_EMPTY, encode(arena, Map.of(), Map.of()));
        }
    }

    @Test
    void readerParsesTheReferenceImplementationsTestVectors() {
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsObject o = Safetensors.read(fromHex(arena, REFERENCE_ATTN_0));
            assertEquals(List.of("attn.0"), o.names());
            Tensor t = o.tensor("attn.0");
            assertEquals(TensorSpec.of(DType.FP32, 1, 2, 3), t.spec());
            assertEquals(5.0f, t.segment().get(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 20));
            assertEquals(80, Safetensors.read(fromHex(arena, REFERENCE_ATTN0_PADDED)).dataStart());
            SafetensorsObject empty = Safetensors.read(fromHex(arena, REFERENCE_EMPTY_WITH_METADATA));
            assertEquals(Map.of("framework", "pt"), empty.metadata());
            assertEquals(List.of(), empty.names());
            assertEquals(List.of(), Safetensors.read(fromHex(arena, REFERENCE_EMPTY)).names());
        }
    }

    @Test
    void writerMatchesPythonOrderingEscapingAndPaddingByteForByte() {
        try (Arena arena = Arena.ofConfined()) {
            Map<String, Tensor> tensors = new LinkedHashMap<>();
            int seed = 1;
            for (Map.Entry<String, TensorSpec> e : mixedSpecs().entrySet()) {
                MemorySegment s = arena.allocate(Math.max(1, e.getValue().byteSize())).asSlice(0, e.getValue().byteSize());
                fillPattern(s, seed++);
                tensors.put(e.getKey(), Tensor.host(e.getValue(), s));
            }
            assertEquals(PYTHON_MIXED, encode(arena, tensors, Map.of("format", "pt")));
        }
    }

    @Test
    void readerParsesThePythonObjectWithZeroCopyViews() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = fromHex(arena, PYTHON_MIXED);
            SafetensorsObject o = Safetensors.read(obj);
            assertEquals(List.of("z\n\"q", "A", "a", "b", "Z", "é"), o.names());
            assertEquals(Map.of("format", "pt"), o.metadata());
            int seed = 1;
            for (Map.Entry<String, TensorSpec> e : mixedSpecs().entrySet()) {
                Tensor t = o.tensor(e.getKey());
                assertEquals(e.getValue(), t.spec(), e.getKey());
                assertTrue(hasPattern(t.segment(), seed++), e.getKey());
                assertTrue(t.segment().address() >= obj.address() + o.dataStart());
            }
            assertEquals(obj.address() + o.dataStart(), o.tensor("z\n\"q").segment().address());
        }
    }

    private static Map<String, TensorSpec> mixedSpecs() {
        Map<String, TensorSpec> m = new LinkedHashMap<>();
        m.put("b", TensorSpec.of(DType.FP16, 2, 3));
        m.put("a", TensorSpec.of(DType.FP16, 1));
        m.put("é", TensorSpec.of(DType.UINT8, 3));
        m.put("z\n\"q", TensorSpec.of(DType.INT64, 2));
        m.put("A", TensorSpec.of(DType.FP64));
        m.put("Z", TensorSpec.of(DType.UINT8, 0));
        return m;
    }

    private static String encode(Arena arena, Map<String, Tensor> tensors, Map<String, String> metadata) {
        Map<String, TensorSpec> specs = new LinkedHashMap<>();
        tensors.forEach((k, v) -> specs.put(k, v.spec()));
        long size = Safetensors.encodedSize(specs, metadata);
        MemorySegment target = arena.allocate(size);
        assertEquals(size, Safetensors.write(target, tensors, metadata));
        return toHex(target);
    }

    @Test
    void layoutPadsTheHeaderToEightBytesAndSlicesInPlace() {
        try (Arena arena = Arena.ofConfined()) {
            TensorSpec spec = TensorSpec.of(DType.BF16, 3, 5);
            SafetensorsLayout layout = Safetensors.layout(Map.of("x", spec), Map.of("k", "v"));
            assertEquals(0, layout.headerBytes() % 8);
            assertEquals("{\"__metadata__\":{\"k\":\"v\"},\"x\":{\"dtype\":\"BF16\",\"shape\":[3,5],"
                    + "\"data_offsets\":[0,30]}}", layout.headerJson().stripTrailing());
            assertEquals(layout.headerBytes() - 8, layout.headerJson().length());
            MemorySegment obj = arena.allocate(layout.encodedSize());
            layout.writeHeader(obj);
            MemorySegment slot = layout.slice(obj, "x");
            assertEquals(layout.dataOffset("x"), slot.address() - obj.address());
            fillPattern(slot, 9);
            SafetensorsObject o = Safetensors.read(obj);
            assertTrue(hasPattern(o.tensor("x").segment(), 9));
            assertEquals(spec, layout.spec("x"));
            assertEquals(List.of("x"), layout.names());
        }
    }

    @Test
    void writeRejectsATooSmallTargetNamingTheSizes() {
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsLayout layout = Safetensors.layout(Map.of("x", TensorSpec.of(DType.FP32, 4)), Map.of());
            MemorySegment small = arena.allocate(layout.encodedSize() - 1);
            KVException e = assertThrows(KVException.class, () -> layout.writeHeader(small));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains(Long.toString(layout.encodedSize())), e.getMessage());
            assertTrue(e.getMessage().contains(Long.toString(small.byteSize())), e.getMessage());
        }
    }

    @Test
    void writeRejectsReservedNamesMissingTensorsAndWrongSpecs() {
        try (Arena arena = Arena.ofConfined()) {
            assertThrows(KVException.class, () -> Safetensors.layout(Map.of("__metadata__", TensorSpec.of(DType.INT8, 1)),
                    Map.of()));
            TensorSpec spec = TensorSpec.of(DType.FP32, 4);
            SafetensorsLayout layout = Safetensors.layout(Map.of("x", spec), Map.of());
            MemorySegment obj = arena.allocate(layout.encodedSize());
            MemorySegment other = arena.allocate(8);
            assertThrows(KVException.class, () -> layout.write(obj, Map.of()));
            KVException e = assertThrows(KVException.class,
                    () -> layout.write(obj, Map.of("x", Tensor.host(TensorSpec.of(DType.INT32, 2), other))));
            assertEquals(ErrorCode.SHAPE_MISMATCH, e.code());
            assertThrows(KVException.class, () -> layout.slice(obj, "y"));
        }
    }

    // ---- strict validation ----

    /** An object with the given JSON header (unpadded) followed by {@code dataBytes} zero bytes. */
    private static MemorySegment object(Arena arena, String json, long dataBytes) {
        byte[] h = json.getBytes(StandardCharsets.UTF_8);
        MemorySegment obj = arena.allocate(8 + h.length + dataBytes);
        obj.set(U64, 0, h.length);
        MemorySegment.copy(h, 0, obj, ValueLayout.JAVA_BYTE, 8, h.length);
        return obj;
    }

    private static KVException corrupt(MemorySegment obj, String... fragments) {
        KVException e = assertThrows(KVException.class, () -> Safetensors.read(obj));
        assertEquals(ErrorCode.CORRUPT_OBJECT, e.code(), e.getMessage());
        for (String f : fragments) {
            assertTrue(e.getMessage().contains(f), "'" + f + "' missing from: " + e.getMessage());
        }
        return e;
    }

    private static String t(String name, String dtype, String shape, long begin, long end) {
        return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + begin + ","
                + end + "]}";
    }

    @Test
    void headerLengthOfTwoToThe63IsRefused() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = object(arena, "{}", 0);
            obj.set(U64, 0, Long.MIN_VALUE);
            corrupt(obj, "9223372036854775808", "2^63");
            obj.set(U64, 0, -1L);
            corrupt(obj, "18446744073709551615");
        }
    }

    @Test
    void headerLengthBeyondTheObjectOrTheLimitIsRefused() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = object(arena, "{}", 0);
            obj.set(U64, 0, 3);
            corrupt(obj, "header length 3", "2 bytes");
            obj.set(U64, 0, Safetensors.DEFAULT_MAX_HEADER_BYTES + 1);
            corrupt(obj, "100000001", "limit of 100000000");
            obj.set(U64, 0, 2);
            KVException e = assertThrows(KVException.class, () -> Safetensors.read(obj, 1));
            assertTrue(e.getMessage().contains("limit of 1 bytes"), e.getMessage());
            for (int len = 0; len < 8; len++) {
                corrupt(obj.asSlice(0, len), "shorter than the 8-byte header length");
            }
        }
    }

    @Test
    void malformedHeadersAreRefused() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{\"a\":", 0), "malformed");
            corrupt(object(arena, " {}", 0), "does not start with '{'");
            corrupt(object(arena, "[]", 0), "does not start with '{'");
            corrupt(object(arena, "", 0), "does not start with '{'");
            corrupt(object(arena, "{} x", 0), "malformed");
            corrupt(object(arena, "{}\0\0", 0), "malformed");
            corrupt(object(arena, "{" + t("a", "U8", "[1]", 0, 1) + "," + t("a", "U8", "[1]", 1, 2) + "}", 2),
                    "malformed", "Duplicate");
            MemorySegment badUtf8 = object(arena, "{\"\u00e9\":1}", 0);
            badUtf8.set(ValueLayout.JAVA_BYTE, 10, (byte) 0xC3);
            badUtf8.set(ValueLayout.JAVA_BYTE, 11, (byte) 0x28);
            corrupt(badUtf8, "UTF-8");
            assertEquals(List.of(), Safetensors.read(object(arena, "{}      ", 0)).names());
        }
    }

    @Test
    void hostileJsonIsRefusedWithoutExhaustingTheStackOrHeap() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{\"__metadata__\":" + "[".repeat(100_000) + "]".repeat(100_000) + "}", 0),
                    "malformed");
            corrupt(object(arena, "{" + t("x", "U8", "[1" + "0".repeat(5_000) + "]", 0, 1) + "}", 1), "malformed");
        }
    }

    @Test
    void unknownDtypesAreRefused() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{" + t("mask", "BOOL", "[4]", 0, 4) + "}", 4), "mask", "BOOL");
            corrupt(object(arena, "{" + t("x", "bf16", "[2]", 0, 4) + "}", 4), "bf16");
            corrupt(object(arena, "{\"x\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1), "no string dtype");
        }
    }

    @Test
    void shapeTimesWidthMustEqualTheOffsetSpan() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{" + t("x", "F32", "[2,3]", 0, 20) + "}", 20), "F32[2, 3]", "24 bytes", "span 20");
            corrupt(object(arena, "{" + t("x", "U8", "[4294967296,4294967296]", 0, 0) + "}", 0), "overflows");
            corrupt(object(arena, "{" + t("x", "U8", "[-1]", 0, 0) + "}", 0), "shape[0] = -1");
            corrupt(object(arena, "{" + t("x", "U8", "[1.0]", 0, 1) + "}", 1), "shape[0] = 1.0");
            corrupt(object(arena, "{" + t("x", "U8", "[99999999999999999999]", 0, 1) + "}", 1), "shape[0]");
            corrupt(object(arena, "{" + t("x", "U8", "[1,1,1,1,1,1,1]", 0, 1) + "}", 1), "rank 7");
            corrupt(object(arena, "{\"x\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1), "no shape array");
        }
    }

    @Test
    void offsetsMustBeOrderedInRangeAndPaired() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{" + t("x", "U8", "[0]", 4, 3) + "}", 4), "[4, 3]", "begin after");
            corrupt(object(arena, "{" + t("x", "U8", "[4]", 0, 4) + "}", 3), "run past the data buffer of 3 bytes");
            corrupt(object(arena, "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1), "3 numbers");
            corrupt(object(arena, "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"extra\":1}}", 1),
                    "unknown field 'extra'");
        }
    }

    @Test
    void overlappingTensorsAreRefused() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{" + t("a", "U8", "[4]", 0, 4) + "," + t("b", "U8", "[4]", 2, 6) + "}", 6),
                    "'b'", "overlap tensor 'a'", "ends at 4");
            corrupt(object(arena, "{" + t("a", "U8", "[4]", 0, 4) + "," + t("b", "U8", "[4]", 0, 4) + "}", 4),
                    "overlap");
        }
    }

    @Test
    void gapsAndUncoveredBytesAreRefused() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{" + t("a", "U8", "[4]", 0, 4) + "," + t("b", "U8", "[2]", 6, 8) + "}", 8),
                    "gap of 2 bytes at data offset 4", "'b'");
            corrupt(object(arena, "{" + t("a", "U8", "[4]", 2, 6) + "}", 6), "gap of 2 bytes at data offset 0");
            corrupt(object(arena, "{" + t("a", "U8", "[4]", 0, 4) + "}", 5), "5 bytes", "1 trailing bytes");
            corrupt(object(arena, "{}", 1), "1 trailing bytes");
        }
    }

    @Test
    void tensorsListedOutOfOffsetOrderAreAccepted() {
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsObject o = Safetensors.read(object(arena,
                    "{" + t("b", "U8", "[2]", 4, 6) + "," + t("a", "I32", "[1]", 0, 4) + "}", 6));
            assertEquals(List.of("a", "b"), o.names());
        }
    }

    @Test
    void metadataMustMapStringsToStrings() {
        try (Arena arena = Arena.ofConfined()) {
            corrupt(object(arena, "{\"__metadata__\":{\"n\":1}}", 0), "metadata value of 'n'");
            corrupt(object(arena, "{\"__metadata__\":[]}", 0), "must be an object");
            corrupt(object(arena, "{\"x\":3}", 0), "tensor 'x' must be an object");
        }
    }

    @Test
    void askingForAMissingTensorNamesTheOnesPresent() {
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsObject o = Safetensors.read(fromHex(arena, REFERENCE_ATTN_0));
            KVException e = assertThrows(KVException.class, () -> o.tensor("attn.1"));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains("attn.0"), e.getMessage());
        }
    }
}
