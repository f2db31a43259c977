package dev.kvconnector.lmcache.format;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Positive;
import org.junit.jupiter.api.Test;

class LmRemoteMetadataTest {
    private static final HexFormat HEX = HexFormat.of();

    @Test
    void singleGroupIs28LittleEndianInt32sInSpecOrder() {
        MemorySegment seg = MemorySegment.ofArray(new byte[28]);
        LmRemoteMetadata.of(1259, 1, 3, 2, 32, 256, 1024).encode(seg, 0);
        assertEquals("eb040000" + "01000000" + "03000000" + "02000000" + "20000000" + "00010000" + "00040000",
                HEX.formatHex(seg.toArray(ValueLayout.JAVA_BYTE)));
        assertEquals(LmRemoteMetadata.of(1259, 1, 3, 2, 32, 256, 1024), LmRemoteMetadata.decode(seg, 0, 1));
    }

    @Test
    void groupsRepeatDtypeAndShapeAfterLengthAndFormat() {
        LmRemoteMetadata m = new LmRemoteMetadata(4096, 1, List.of(new LmRemoteMetadata.Group(3, 2, 4, 16, 128),
                new LmRemoteMetadata.Group(4, 2, 4, 16, 64)));
        assertEquals(48, m.byteSize());
        MemorySegment seg = MemorySegment.ofArray(new byte[52]);
        m.encode(seg, 4);
        ValueLayout.OfInt le = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
        assertEquals(4, seg.get(le, 4 + 8 + 20), "the second group's dtype");
        assertEquals(64, seg.get(le, 4 + 44), "the second group's last dimension");
        assertEquals(m, LmRemoteMetadata.decode(seg, 4, 2));
    }

    @Test
    void corruptHeadersAreRefused() {
        MemorySegment seg = MemorySegment.ofArray(new byte[28]);
        LmRemoteMetadata.of(10, 9, 3, 1, 1, 1, 1).encode(seg, 0);
        assertEquals(ErrorCode.CORRUPT_OBJECT,
                assertThrows(KVException.class, () -> LmRemoteMetadata.decode(seg, 0, 1)).code());
        LmRemoteMetadata.of(-1, 1, 3, 1, 1, 1, 1).encode(seg, 0);
        assertEquals(ErrorCode.CORRUPT_OBJECT,
                assertThrows(KVException.class, () -> LmRemoteMetadata.decode(seg, 0, 1)).code());
        LmRemoteMetadata.of(10, 1, 9, 1, 1, 1, 1).encode(seg, 0);
        assertEquals(ErrorCode.CORRUPT_OBJECT,
                assertThrows(KVException.class, () -> LmRemoteMetadata.decode(seg, 0, 1)).code());
        LmRemoteMetadata.of(10, 1, 3, 1, -1, 1, 1).encode(seg, 0);
        assertEquals(ErrorCode.CORRUPT_OBJECT,
                assertThrows(KVException.class, () -> LmRemoteMetadata.decode(seg, 0, 1)).code());
        assertEquals(ErrorCode.SHAPE_MISMATCH,
                assertThrows(KVException.class, () -> LmRemoteMetadata.decode(seg, 1, 1)).code());
        assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                () -> LmRemoteMetadata.of(1, 1, 1, 1, 1, 1, 1).encode(MemorySegment.ofArray(new byte[27]), 0))
                .code());
    }

    @Test
    void dtypeNumbersFollowLmcache() {
        assertEquals(2, LmRemoteMetadata.dtypeCode(DType.FP16));
        assertEquals(DType.FP16, LmRemoteMetadata.dtypeOfCode(1));
        assertEquals(DType.FP16, LmRemoteMetadata.dtypeOfCode(2));
        assertEquals(3, LmRemoteMetadata.dtypeCode(DType.BF16));
        assertEquals(7, LmRemoteMetadata.dtypeCode(DType.FP8_E4M3));
        assertEquals(8, LmRemoteMetadata.dtypeCode(DType.FP8_E5M2));
        assertNull(LmRemoteMetadata.dtypeOfCode(0));
        for (DType d : DType.values()) {
            if (d != DType.INT8 && d != DType.INT32 && d != DType.INT64) {
                assertEquals(d, LmRemoteMetadata.dtypeOfCode(LmRemoteMetadata.dtypeCode(d)));
            }
        }
        assertEquals(ErrorCode.DTYPE_MISMATCH,
                assertThrows(KVException.class, () -> LmRemoteMetadata.dtypeCode(DType.INT8)).code());
    }

    @Property(tries = 200)
    void headersRoundTrip(@ForAll @Positive int length, @ForAll @IntRange(min = 1, max = 6) int fmt,
                          @ForAll @IntRange(min = 0, max = 8) int dtype, @ForAll @Positive int s0,
                          @ForAll @Positive int s1, @ForAll @Positive int s2, @ForAll @Positive int s3,
                          @ForAll @IntRange(min = 1, max = 4) int groups) {
        List<LmRemoteMetadata.Group> gs = new java.util.ArrayList<>();
        for (int i = 0; i < groups; i++) {
            gs.add(new LmRemoteMetadata.Group(dtype, s0, s1 ^ i, s2, s3));
        }
        LmRemoteMetadata m = new LmRemoteMetadata(length, fmt, gs);
        MemorySegment seg = MemorySegment.ofArray(new byte[m.byteSize()]);
        m.encode(seg, 0);
        assertEquals(m, LmRemoteMetadata.decode(seg, 0, groups));
    }
}
