package dev.kvconnector.codec;

import static dev.kvconnector.codec.CodecTestSupport.fillPattern;
import static dev.kvconnector.codec.CodecTestSupport.flipByte;
import static dev.kvconnector.codec.CodecTestSupport.fromHex;
import static dev.kvconnector.codec.CodecTestSupport.hasPattern;
import static dev.kvconnector.codec.CodecTestSupport.toHex;
import static dev.kvconnector.codec.RawTensorFormat.BAD_HEADER;
import static dev.kvconnector.codec.RawTensorFormat.BAD_HEADER_CRC;
import static dev.kvconnector.codec.RawTensorFormat.BAD_LENGTH;
import static dev.kvconnector.codec.RawTensorFormat.BAD_MAGIC;
import static dev.kvconnector.codec.RawTensorFormat.BAD_PAYLOAD_SUM;
import static dev.kvconnector.codec.RawTensorFormat.BAD_VERSION;
import static dev.kvconnector.codec.RawTensorFormat.HEADER_BYTES;
import static dev.kvconnector.codec.RawTensorFormat.LAYOUT_MISMATCH;
import static dev.kvconnector.codec.RawTensorFormat.OK;
import static dev.kvconnector.codec.RawTensorFormat.SPEC_MISMATCH;
import static dev.kvconnector.codec.RawTensorFormat.TRUNCATED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import dev.kvconnector.memory.WordSum;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

class RawTensorFormatTest {
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final TensorSpec SPEC = TensorSpec.of(DType.BF16, 2, 1, 3);
    private static final long FINGERPRINT = 0x0123456789ABCDEFL;

    /** Written by the Python writer in docs/raw-format.md (struct.pack, a bitwise CRC32C and the word sum). */
    private static final String PYTHON_CHECKSUMMED = "4b56435202000203030000001bd68f49efcdab89674523010c00000000000000"
            + "02000000010000000300000000000000000000000000000000000000a27eb2b40b30557a9fc4e90e33587da2";
    private static final String PYTHON_NO_CHECKSUM = "4b564352020002030300000000000000feffffffffffffff0c00000000000000"
            + "020000000100000003000000000000000000000000000000010000006fcd3d0c0b30557a9fc4e90e33587da2";

    private static MemorySegment encoded(Arena arena, TensorSpec spec, boolean checksum) {
        MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(spec));
        fillPattern(RawTensorFormat.payload(obj), 11);
        RawTensorFormat.writeHeader(obj, spec, 3, FINGERPRINT, checksum);
        return obj;
    }

    /** Recomputes the header CRC after a test changed a field, so that the field itself is what gets checked. */
    private static void reseal(MemorySegment obj) {
        obj.set(I32, 60, RawTensorFormat.headerCrc(obj));
    }

    @Test
    void writeHeaderProducesTheBytesOfThePythonWriter() {
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(PYTHON_CHECKSUMMED, toHex(encoded(arena, SPEC, true)));
            MemorySegment noChecksum = arena.allocate(RawTensorFormat.encodedSize(SPEC));
            fillPattern(RawTensorFormat.payload(noChecksum), 11);
            RawTensorFormat.writeHeader(noChecksum, SPEC, 3, -2, false);
            assertEquals(PYTHON_NO_CHECKSUM, toHex(noChecksum));
        }
    }

    @Test
    void aVersion1ObjectWithItsPayloadCrc32cReadsAsAnotherVersion() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v1 = fromHex(arena, "4b564352010002030300000033649ed3efcdab89674523010c000000000000"
                    + "00020000000100000003000000000000000000000000000000000000003880ff5d0b30557a9fc4e90e33587da2");
            assertEquals(BAD_VERSION, RawTensorFormat.validate(v1, v1.byteSize(), SPEC, FINGERPRINT));
        }
    }

    @Test
    void validateAcceptsObjectsOfThePythonWriter() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = fromHex(arena, PYTHON_CHECKSUMMED);
            assertEquals(OK, RawTensorFormat.validate(a, a.byteSize(), SPEC, FINGERPRINT));
            MemorySegment b = fromHex(arena, PYTHON_NO_CHECKSUM);
            assertEquals(OK, RawTensorFormat.validate(b, b.byteSize(), SPEC, -2));
        }
    }

    @Test
    void headerFieldsSitAtTheDocumentedOffsets() {
        try (Arena arena = Arena.ofConfined()) {
            TensorSpec spec = TensorSpec.of(DType.FP32, 4, 5, 6, 7, 8, 9);
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(spec));
            RawTensorFormat.writeHeader(obj, spec, 1234, FINGERPRINT, true);
            assertEquals("KVCR", new String(obj.asSlice(0, 4).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII));
            assertEquals(RawTensorFormat.VERSION, obj.get(U16, 4));
            assertEquals(DType.FP32.id(), obj.get(ValueLayout.JAVA_BYTE, 6));
            assertEquals(6, obj.get(ValueLayout.JAVA_BYTE, 7));
            assertEquals(1234, obj.get(I32, 8));
            assertEquals(FINGERPRINT, obj.get(I64, 16));
            assertEquals(spec.byteSize(), obj.get(I64, 24));
            for (int i = 0; i < 6; i++) {
                assertEquals(spec.dim(i), obj.get(I32, 32 + 4 * i));
            }
            assertEquals(0, obj.get(U16, 56));
            assertEquals(0, obj.get(U16, 58));
            CRC32C crc = new CRC32C();
            crc.update(obj.asSlice(0, 60).toArray(ValueLayout.JAVA_BYTE));
            assertEquals((int) crc.getValue(), obj.get(I32, 60));
            assertEquals(WordSum.of(obj, 64, obj.byteSize() - 64), obj.get(I32, 12));
        }
    }

    @Test
    void theHeaderCrcIsTheCrc32cOfBytes0To59WithTheKnownCheckValue() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(64);
            MemorySegment.copy("123456789".getBytes(StandardCharsets.US_ASCII), 0, s, ValueLayout.JAVA_BYTE, 0, 9);
            CRC32C crc = new CRC32C();
            crc.update(s.asSlice(0, 60).toArray(ValueLayout.JAVA_BYTE));
            assertEquals((int) crc.getValue(), RawTensorFormat.headerCrc(s));
            CRC32C check = new CRC32C();
            check.update("123456789".getBytes(StandardCharsets.US_ASCII));
            assertEquals(0xE3069283L, check.getValue(), "the CRC32C the docs name");
        }
    }

    @Test
    void validateAcceptsTheRightSpecAndFingerprintAndWildcards() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            assertEquals(OK, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
            assertEquals(OK, RawTensorFormat.validate(obj, obj.byteSize(), null, 0));
            assertTrue(hasPattern(RawTensorFormat.payload(obj), 11));
        }
    }

    @Test
    void validateReturnsTruncatedForEveryLengthShorterThanTheHeader() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            for (int len = 0; len < HEADER_BYTES; len++) {
                assertEquals(TRUNCATED, RawTensorFormat.validate(obj, len, SPEC, FINGERPRINT), "length " + len);
                MemorySegment cut = obj.asSlice(0, len);
                assertEquals(TRUNCATED, RawTensorFormat.validate(cut, len, null, 0), "slice of " + len);
            }
        }
    }

    @Test
    void validateReturnsTruncatedForEveryShortPayload() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            for (long len = HEADER_BYTES; len < obj.byteSize(); len++) {
                assertEquals(TRUNCATED, RawTensorFormat.validate(obj, len, SPEC, FINGERPRINT), "length " + len);
            }
        }
    }

    @Test
    void validateReturnsBadLengthWhenTheObjectHasTrailingBytes() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(SPEC) + 5);
            RawTensorFormat.writeHeader(obj, SPEC, 3, FINGERPRINT, true);
            assertEquals(BAD_LENGTH, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
            assertEquals(OK, RawTensorFormat.validate(obj, RawTensorFormat.encodedSize(SPEC), SPEC, FINGERPRINT));
        }
    }

    @Test
    void everyFlippedHeaderByteIsDetected() {
        try (Arena arena = Arena.ofConfined()) {
            for (int off = 0; off < HEADER_BYTES; off++) {
                MemorySegment obj = encoded(arena, SPEC, true);
                flipByte(obj, off);
                int expected = off < 4 ? BAD_MAGIC : off < 6 ? BAD_VERSION : BAD_HEADER_CRC;
                assertEquals(expected, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT), "offset " + off);
                assertTrue(RawTensorFormat.isCorrupt(expected) || expected == BAD_VERSION);
            }
        }
    }

    @Test
    void everyFlippedPayloadByteIsBadPayloadCrc() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            for (long off = HEADER_BYTES; off < obj.byteSize(); off++) {
                flipByte(obj, off);
                assertEquals(BAD_PAYLOAD_SUM, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
                flipByte(obj, off);
                assertEquals(OK, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
            }
        }
    }

    @Test
    void withoutChecksumAFlippedPayloadByteGoesUnnoticedButTheHeaderIsStillChecked() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, false);
            assertEquals(RawTensorFormat.FLAG_NO_CHECKSUM, obj.get(U16, 56));
            assertEquals(0, obj.get(I32, 12));
            flipByte(obj, HEADER_BYTES + 3);
            assertEquals(OK, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
            flipByte(obj, 20);
            assertEquals(BAD_HEADER_CRC, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
        }
    }

    @Test
    void fingerprintMismatchIsLayoutMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            long other = KVLayout.preset("llama3-8b").fingerprint();
            int status = RawTensorFormat.validate(obj, obj.byteSize(), SPEC, other);
            assertEquals(LAYOUT_MISMATCH, status);
            assertTrue(RawTensorFormat.isLayoutMismatch(status));
            assertFalse(RawTensorFormat.isCorrupt(status));
        }
    }

    @Test
    void anObjectWithoutFingerprintMismatchesAnExpectedOne() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(SPEC));
            RawTensorFormat.writeHeader(obj, SPEC, 0, 0, true);
            assertEquals(LAYOUT_MISMATCH, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, FINGERPRINT));
            assertEquals(OK, RawTensorFormat.validate(obj, obj.byteSize(), SPEC, 0));
        }
    }

    @Test
    void otherDtypeOrShapeIsSpecMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            for (TensorSpec other : List.of(TensorSpec.of(DType.FP16, 2, 1, 3), TensorSpec.of(DType.BF16, 2, 3, 1),
                    TensorSpec.of(DType.BF16, 6), TensorSpec.of(DType.BF16, 2, 1, 3, 1))) {
                int status = RawTensorFormat.validate(obj, obj.byteSize(), other, FINGERPRINT);
                assertEquals(SPEC_MISMATCH, status, other.toString());
                assertTrue(RawTensorFormat.isLayoutMismatch(status));
            }
        }
    }

    @Test
    void impossibleFieldsUnderAValidHeaderCrcAreBadHeader() {
        try (Arena arena = Arena.ofConfined()) {
            record Tamper(String what, long offset, int bytes, long value, int expected) {
            }
            List<Tamper> cases = List.of(
                    new Tamper("unknown dtype 0", 6, 1, 0, BAD_HEADER),
                    new Tamper("unknown dtype 200", 6, 1, 200, BAD_HEADER),
                    new Tamper("rank 0", 7, 1, 0, BAD_HEADER),
                    new Tamper("rank 7", 7, 1, 7, BAD_HEADER),
                    new Tamper("negative tokens", 8, 4, -1, BAD_HEADER),
                    new Tamper("negative dimension", 36, 4, -1, BAD_HEADER),
                    new Tamper("unused dimension set", 52, 4, 1, BAD_HEADER),
                    new Tamper("payload checksum under the no-checksum flag", 56, 2, RawTensorFormat.FLAG_NO_CHECKSUM, BAD_HEADER),
                    new Tamper("payload bytes off by one", 24, 8, SPEC.byteSize() + 1, BAD_LENGTH),
                    new Tamper("payload bytes negative", 24, 8, -12, BAD_LENGTH),
                    new Tamper("unknown flag", 56, 2, 2, BAD_VERSION),
                    new Tamper("reserved set", 58, 2, 1, BAD_VERSION));
            for (Tamper t : cases) {
                MemorySegment obj = encoded(arena, SPEC, true);
                switch (t.bytes()) {
                    case 1 -> obj.set(ValueLayout.JAVA_BYTE, t.offset(), (byte) t.value());
                    case 2 -> obj.set(U16, t.offset(), (short) t.value());
                    case 4 -> obj.set(I32, t.offset(), (int) t.value());
                    default -> obj.set(I64, t.offset(), t.value());
                }
                reseal(obj);
                assertEquals(t.expected(), RawTensorFormat.validate(obj, obj.byteSize(), null, 0), t.what());
                assertThrows(KVException.class, () -> RawTensorFormat.readHeader(obj), t.what());
            }
        }
    }

    @Test
    void shapesWhoseByteSizeOverflowsAreBadLengthNotAnException() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            obj.set(ValueLayout.JAVA_BYTE, 7, (byte) 6);
            for (int i = 0; i < 6; i++) {
                obj.set(I32, 32 + 4 * i, Integer.MAX_VALUE);
            }
            reseal(obj);
            assertEquals(BAD_LENGTH, RawTensorFormat.validate(obj, obj.byteSize(), null, 0));
        }
    }

    @Test
    void aPayloadLengthBeyondTheObjectIsTruncated() {
        try (Arena arena = Arena.ofConfined()) {
            TensorSpec big = TensorSpec.of(DType.UINT8, Integer.MAX_VALUE, Integer.MAX_VALUE);
            MemorySegment obj = arena.allocate(HEADER_BYTES);
            obj.set(I32, 0, RawTensorFormat.MAGIC);
            obj.set(U16, 4, (short) RawTensorFormat.VERSION);
            obj.set(ValueLayout.JAVA_BYTE, 6, (byte) DType.UINT8.id());
            obj.set(ValueLayout.JAVA_BYTE, 7, (byte) 2);
            obj.set(I64, 24, big.byteSize());
            obj.set(I32, 32, Integer.MAX_VALUE);
            obj.set(I32, 36, Integer.MAX_VALUE);
            obj.set(U16, 56, (short) RawTensorFormat.FLAG_NO_CHECKSUM);
            reseal(obj);
            assertEquals(TRUNCATED, RawTensorFormat.validate(obj, obj.byteSize(), null, 0));
            assertEquals(big, RawTensorFormat.readHeader(obj).spec());
        }
    }

    @Test
    void readHeaderReturnsEveryField() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            RawHeader h = RawTensorFormat.readHeader(obj);
            assertEquals(2, h.version());
            assertEquals(SPEC, h.spec());
            assertEquals(3, h.tokens());
            assertEquals(FINGERPRINT, h.layoutFingerprint());
            assertEquals(SPEC.byteSize(), h.payloadBytes());
            assertEquals(obj.byteSize(), h.objectBytes());
            assertTrue(h.checksummed());
            assertEquals(obj.get(I32, 12), h.payloadSum());
            assertEquals(obj.get(I32, 60), h.headerCrc());
        }
    }

    @Test
    void readHeaderThrowsCorruptObjectNamingTheCause() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            flipByte(obj, 30);
            KVException e = assertThrows(KVException.class, () -> RawTensorFormat.readHeader(obj));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains("header CRC32C mismatch"), e.getMessage());
            KVException shortObj = assertThrows(KVException.class, () -> RawTensorFormat.readHeader(obj.asSlice(0, 10)));
            assertTrue(shortObj.getMessage().contains("truncated"), shortObj.getMessage());
        }
    }

    @Test
    void writeHeaderRejectsATooSmallSegmentNamingEveryNumber() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment small = arena.allocate(70);
            KVException e = assertThrows(KVException.class,
                    () -> RawTensorFormat.writeHeader(small, SPEC, 3, FINGERPRINT, true));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            for (String n : List.of("70", "64", "12", "76")) {
                assertTrue(e.getMessage().contains(n), e.getMessage());
            }
        }
    }

    @Test
    void writeHeaderRejectsScalarsAndNegativeTokens() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = arena.allocate(128);
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                    () -> RawTensorFormat.writeHeader(obj, TensorSpec.of(DType.INT32), 0, 0, true)).code());
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                    () -> RawTensorFormat.writeHeader(obj, SPEC, -1, 0, true)).code());
        }
    }

    @Test
    void writeHeaderRejectsDimensionsBeyondI32() {
        try (Arena arena = Arena.ofConfined()) {
            TensorSpec wide = TensorSpec.of(DType.UINT8, 1L << 31, 0);
            MemorySegment obj = arena.allocate(64);
            KVException e = assertThrows(KVException.class, () -> RawTensorFormat.writeHeader(obj, wide, 0, 0, true));
            assertTrue(e.getMessage().contains("2147483648"), e.getMessage());
        }
    }

    @Test
    void validateRejectsAnObjectSizeLargerThanTheSegment() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment obj = encoded(arena, SPEC, true);
            assertThrows(KVException.class, () -> RawTensorFormat.validate(obj, obj.byteSize() + 1, null, 0));
            assertThrows(KVException.class, () -> RawTensorFormat.validate(obj, -1, null, 0));
        }
    }

    @Test
    void writeCopiesATensorAndValidates() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(SPEC.byteSize());
            fillPattern(src, 11);
            MemorySegment obj = arena.allocate(RawTensorFormat.encodedSize(SPEC));
            assertEquals(obj.byteSize(), RawTensorFormat.write(obj, Tensor.host(SPEC, src), 3, FINGERPRINT, true));
            assertEquals(PYTHON_CHECKSUMMED, toHex(obj));
        }
    }

    @Test
    void statusHelpersDescribeEveryStatusDistinctly() {
        int[] all = {OK, TRUNCATED, BAD_MAGIC, BAD_VERSION, BAD_HEADER_CRC, BAD_HEADER, BAD_LENGTH, SPEC_MISMATCH,
            LAYOUT_MISMATCH, BAD_PAYLOAD_SUM};
        Set<String> texts = new HashSet<>();
        for (int s : all) {
            texts.add(RawTensorFormat.describe(s));
            assertFalse(RawTensorFormat.isCorrupt(s) && RawTensorFormat.isLayoutMismatch(s));
        }
        assertEquals(all.length, texts.size());
        assertTrue(RawTensorFormat.describe(-99).contains("-99"));
        assertFalse(RawTensorFormat.isCorrupt(OK) || RawTensorFormat.isLayoutMismatch(OK));
        assertFalse(RawTensorFormat.isCorrupt(BAD_VERSION));
    }
    @Test
    void aDetachedHeaderEqualsTheInPlaceHeaderWithoutChecksumAndValidatesWithoutThePayload() {
        TensorSpec spec = TensorSpec.of(DType.BF16, 2, 5, 8, 16);
        long fingerprint = 0x1234_5678_9abc_def0L;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(RawTensorFormat.encodedSize(spec), 64);
            fillPattern(RawTensorFormat.payload(object), 3);
            RawTensorFormat.writeHeader(object, spec, 5, fingerprint, false);
            MemorySegment header = arena.allocate(HEADER_BYTES, 64);
            RawTensorFormat.writeDetachedHeader(header, spec, 5, fingerprint);
            assertEquals(-1L, header.mismatch(object.asSlice(0, HEADER_BYTES)));
            assertEquals(OK, RawTensorFormat.validate(object, object.byteSize(), spec, fingerprint));
            long size = object.byteSize();
            assertEquals(OK, RawTensorFormat.validateHeader(header, size, spec, fingerprint));
            assertEquals(LAYOUT_MISMATCH, RawTensorFormat.validateHeader(header, size, spec, fingerprint + 1));
            assertEquals(SPEC_MISMATCH, RawTensorFormat.validateHeader(header, size, TensorSpec.of(DType.BF16, 2, 5,
                    8, 8), fingerprint));
            assertEquals(TRUNCATED, RawTensorFormat.validateHeader(header, size - 1, spec, fingerprint));
            assertEquals(TRUNCATED, RawTensorFormat.validateHeader(header, 10, spec, fingerprint));
            assertEquals(BAD_LENGTH, RawTensorFormat.validateHeader(header, size + 1, spec, fingerprint));
            flipByte(header, 20);
            assertEquals(BAD_HEADER_CRC, RawTensorFormat.validateHeader(header, size, spec, fingerprint));
        }
    }
}
