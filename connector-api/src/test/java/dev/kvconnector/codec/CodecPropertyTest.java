package dev.kvconnector.codec;

import static dev.kvconnector.codec.CodecTestSupport.fillPattern;
import static dev.kvconnector.codec.CodecTestSupport.flipByte;
import static dev.kvconnector.codec.CodecTestSupport.hasPattern;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/** Round trips and damage detection over random dtypes, shapes, names and metadata, for every codec. */
class CodecPropertyTest {
    /** The reference writer's dtype order (its Dtype enum, by increasing alignment), written out independently. */
    private static final List<DType> REFERENCE_ORDER = List.of(DType.UINT8, DType.INT8, DType.FP8_E5M2,
            DType.FP8_E4M3, DType.FP16, DType.BF16, DType.INT32, DType.FP32, DType.FP64, DType.INT64);

    @Provide
    Arbitrary<TensorSpec> rawSpecs() {
        return specs(1);
    }

    @Provide
    Arbitrary<TensorSpec> anySpecs() {
        return specs(0);
    }

    private static Arbitrary<TensorSpec> specs(int minRank) {
        return Combinators.combine(Arbitraries.of(DType.class),
                        Arbitraries.longs().between(0, 5).list().ofMinSize(minRank).ofMaxSize(TensorSpec.MAX_RANK))
                .as((dtype, dims) -> TensorSpec.of(dtype, dims.stream().mapToLong(Long::longValue).toArray()));
    }

    @Provide
    Arbitrary<Map<String, TensorSpec>> tensorSets() {
        Arbitrary<String> names = Arbitraries.strings().withChars("abAZ_.0é\"\\\n/").ofMinLength(1).ofMaxLength(6);
        return Arbitraries.maps(names, specs(0)).ofMaxSize(6);
    }

    @Provide
    Arbitrary<Map<String, String>> metadata() {
        Arbitrary<String> text = Arbitraries.strings().withChars("ab \"é\t{}").ofMaxLength(5);
        return Arbitraries.maps(text, text).ofMaxSize(3);
    }

    // ---- raw format ----

    @Property(tries = 300)
    void rawRoundTripPreservesPayloadAndHeader(@ForAll("rawSpecs") TensorSpec spec,
                                               @ForAll @IntRange(min = 0) int tokens,
                                               @ForAll long fingerprint, @ForAll boolean checksum,
                                               @ForAll @IntRange(max = 255) int seed) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(Math.max(1, spec.byteSize())).asSlice(0, spec.byteSize());
            fillPattern(src, seed);
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(spec));
            RawTensorFormat.write(obj, Tensor.host(spec, src), tokens, fingerprint, checksum);
            assertEquals(RawTensorFormat.OK, RawTensorFormat.validate(obj, obj.byteSize(), spec, fingerprint));
            assertTrue(hasPattern(RawTensorFormat.payload(obj), seed));
            RawHeader h = RawTensorFormat.readHeader(obj);
            assertEquals(spec, h.spec());
            assertEquals(tokens, h.tokens());
            assertEquals(fingerprint, h.layoutFingerprint());
            assertEquals(checksum, h.checksummed());
        }
    }

    @Property(tries = 300)
    void rawDetectsEverySingleByteDamage(@ForAll("rawSpecs") TensorSpec spec, @ForAll long where) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(spec));
            fillPattern(RawTensorFormat.payload(obj), 1);
            RawTensorFormat.writeHeader(obj, spec, 0, 42, true);
            long offset = Math.floorMod(where, obj.byteSize());
            flipByte(obj, offset);
            int status = RawTensorFormat.validate(obj, obj.byteSize(), spec, 42);
            assertNotEquals(RawTensorFormat.OK, status);
            if (offset >= RawTensorFormat.HEADER_BYTES) {
                assertEquals(RawTensorFormat.BAD_PAYLOAD_SUM, status);
            }
        }
    }

    @Property(tries = 200)
    void rawReportsEveryShortenedObjectAsTruncated(@ForAll("rawSpecs") TensorSpec spec, @ForAll long where) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(spec));
            RawTensorFormat.writeHeader(obj, spec, 0, 0, false);
            long len = Math.floorMod(where, obj.byteSize());
            assertEquals(RawTensorFormat.TRUNCATED, RawTensorFormat.validate(obj, len, null, 0));
        }
    }

    // ---- safetensors ----

    @Property(tries = 300)
    void safetensorsRoundTripPreservesEveryTensorAndTheMetadata(@ForAll("tensorSets") Map<String, TensorSpec> specs,
                                                                 @ForAll("metadata") Map<String, String> metadata) {
        try (Arena arena = Arena.ofConfined()) {
            Map<String, Tensor> tensors = new LinkedHashMap<>();
            int seed = 0;
            for (Map.Entry<String, TensorSpec> e : specs.entrySet()) {
                long size = e.getValue().byteSize();
                MemorySegment s = arena.allocate(Math.max(1, size)).asSlice(0, size);
                fillPattern(s, seed++);
                tensors.put(e.getKey(), Tensor.host(e.getValue(), s));
            }
            MemorySegment obj = arena.allocate(Safetensors.encodedSize(specs, metadata));
            assertEquals(obj.byteSize(), Safetensors.write(obj, tensors, metadata));

            SafetensorsObject read = Safetensors.read(obj);
            assertEquals(0, read.dataStart() % 8);
            assertEquals(metadata, read.metadata());
            assertEquals(specs.keySet(), new java.util.HashSet<>(read.names()));
            seed = 0;
            for (Map.Entry<String, TensorSpec> e : specs.entrySet()) {
                Tensor t = read.tensor(e.getKey());
                assertEquals(e.getValue(), t.spec());
                assertTrue(hasPattern(t.segment(), seed++), e.getKey());
            }
            List<String> expectedOrder = new ArrayList<>(specs.keySet());
            expectedOrder.sort(Comparator.<String>comparingInt(n -> -REFERENCE_ORDER.indexOf(specs.get(n).dtype()))
                    .thenComparing((a, b) -> Arrays.compareUnsigned(a.getBytes(StandardCharsets.UTF_8),
                            b.getBytes(StandardCharsets.UTF_8))));
            assertEquals(expectedOrder, read.names());
        }
    }

    @Property(tries = 200)
    void safetensorsRefusesEveryShortenedOrExtendedObject(@ForAll("tensorSets") Map<String, TensorSpec> specs,
                                                          @ForAll long where) {
        try (Arena arena = Arena.ofConfined()) {
            SafetensorsLayout layout = Safetensors.layout(specs, Map.of());
            MemorySegment obj = arena.allocate(layout.encodedSize() + 1);
            layout.writeHeader(obj);
            long len = Math.floorMod(where, layout.encodedSize());
            assertEquals(ErrorCode.CORRUPT_OBJECT,
                    assertThrows(KVException.class, () -> Safetensors.read(obj.asSlice(0, len))).code());
            assertEquals(ErrorCode.CORRUPT_OBJECT, assertThrows(KVException.class, () -> Safetensors.read(obj)).code());
        }
    }

    // ---- vLLM V0 ----

    @Property(tries = 200)
    void vllmV0RoundTripPreservesTensorAndDeviceId(@ForAll("anySpecs") TensorSpec spec, @ForAll int deviceId) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(Math.max(1, spec.byteSize())).asSlice(0, spec.byteSize());
            fillPattern(src, 77);
            MemorySegment obj = arena.allocate(VllmV0Object.encodedSize(spec));
            VllmV0Object.encode(obj, Tensor.host(spec, src), deviceId);
            VllmV0Object v = VllmV0Object.decode(obj);
            assertEquals(spec, v.tensor().spec());
            assertEquals(deviceId, v.deviceId());
            assertTrue(hasPattern(v.tensor().segment(), 77));
        }
    }
}
