package dev.kvconnector.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

class ChecksummedCopyTest {

    private static long crcOf(MemorySegment s, long offset, long bytes) {
        CRC32C c = new CRC32C();
        c.update(s.asSlice(offset, bytes).asByteBuffer());
        return c.getValue();
    }

    @Test
    void copiesEveryByteAndComputesTheCrcOfWhatItCopiedAcrossChunkBoundaries() {
        long bytes = 3 * ChecksummedCopy.CHUNK_BYTES + 12_345;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, bytes + 100, 3);
            MemorySegment dst = a.allocate(bytes + 200);
            CRC32C crc = new CRC32C();
            ChecksummedCopy.copy(src, 100, dst, 7, bytes, crc);
            assertEquals(-1, MemorySegment.mismatch(src, 100, 100 + bytes, dst, 7, 7 + bytes));
            assertEquals(crcOf(src, 100, bytes), crc.getValue());
        }
    }

    @Test
    void aCrcContinuedOverTwoCopiesEqualsTheCrcOfTheirConcatenation() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 300_000, 4);
            MemorySegment dst = a.allocate(300_000);
            CRC32C crc = new CRC32C();
            ChecksummedCopy.copy(src, 0, dst, 0, 100_001, crc);
            ChecksummedCopy.copy(src, 100_001, dst, 100_001, 199_999, crc);
            assertEquals(crcOf(src, 0, 300_000), crc.getValue());
            CRC32C inPlace = new CRC32C();
            ChecksummedCopy.update(inPlace, dst, 0, 300_000);
            assertEquals(crc.getValue(), inPlace.getValue());
        }
    }

    @Test
    void aRangeOutsideASegmentIsRefusedBeforeAnythingIsCopied() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 1000, 5);
            MemorySegment dst = a.allocate(1000);
            CRC32C crc = new CRC32C();
            assertThrows(IndexOutOfBoundsException.class, () -> ChecksummedCopy.copy(src, 0, dst, 1, 1000, crc));
            assertEquals(0, dst.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 1), "bytes were copied before the check");
            assertEquals(new CRC32C().getValue(), crc.getValue());
        }
    }

    @Test
    void aCompiledCopyAllocatesNothing() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 4 * ChecksummedCopy.CHUNK_BYTES, 6);
            MemorySegment dst = a.allocate(src.byteSize());
            CRC32C crc = new CRC32C();
            long best = Long.MAX_VALUE;
            for (int round = 0; round < 30 && best > 0; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < 2000; i++) {
                    crc.reset();
                    ChecksummedCopy.copy(src, 0, dst, 0, src.byteSize(), crc);
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            assertTrue(best == 0, "2000 compiled copies allocated " + best + " bytes");
        }
    }
}
