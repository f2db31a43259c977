package dev.kvconnector.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

class ChecksummedCopyTest {

    @Test
    void inCiTheNativeCopyIsBuiltIntoTheJarAndUsed() {
        // CI installs cmake and gcc: a jar built there without the library is a defect (a CPU without AVX2 is not).
        assumeTrue("true".equals(System.getenv("CI")), "outside CI: " + NativeCopy.status());
        assertTrue(NativeCopy.available() || NativeCopy.status().contains("no AVX2"), NativeCopy.status());
    }

    @Test
    void everySplitOfAPayloadAtEveryOffsetGivesTheDefinitionsSumAndEveryByte() {
        // Sizes below and above NativeCopy.MIN_BYTES and the native step, offsets that misalign source, destination
        // and payload position against each other: the native and the Java copy must agree with the definition.
        long[] sizes = {1, 7, 4095, 4096, 4099, 65_536 + 5, ChecksummedCopy.NATIVE_STEP_BYTES + 12_345};
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, ChecksummedCopy.NATIVE_STEP_BYTES * 2 + 200, 8);
            MemorySegment dst = a.allocate(src.byteSize() + 64, 64);
            for (long size : sizes) {
                for (long head : new long[] {0, 1, 3, 4, 6, 8}) {
                    for (long dstShift : new long[] {0, 5, 8, 32}) {
                        dst.fill((byte) 0x5A);
                        WordSum sum = new WordSum();
                        ChecksummedCopy.copy(src, 0, dst, dstShift, head, sum);
                        ChecksummedCopy.copy(src, head, dst, dstShift + head, size, sum);
                        String at = "size " + size + ", first copy " + head + " bytes, destination +" + dstShift;
                        assertEquals(head + size, sum.position(), at);
                        assertEquals(WordSumTest.definition(src, 0, head + size), sum.value(), at);
                        assertEquals(-1, MemorySegment.mismatch(src, 0, head + size, dst, dstShift,
                                dstShift + head + size), at);
                        assertEquals((byte) 0x5A, dst.get(ValueLayout.JAVA_BYTE, dstShift + head + size),
                                "a byte past the range was written: " + at);
                    }
                }
            }
        }
    }

    @Test
    void aReadOnlyDestinationIsRefusedAndNothingIsWritten() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 64 * 1024, 9);
            MemorySegment target = a.allocate(src.byteSize());
            WordSum sum = new WordSum();
            assertThrows(IllegalArgumentException.class,
                    () -> ChecksummedCopy.copy(src, 0, target.asReadOnly(), 0, src.byteSize(), sum));
            assertEquals(-1, target.mismatch(a.allocate(target.byteSize())),
                    "bytes were written into a read-only segment");
        }
    }

    @Test
    void copiesEveryByteAndSumsWhatItCopiedAcrossChunkBoundaries() {
        long bytes = 3 * ChecksummedCopy.CHUNK_BYTES + 12_345;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, bytes + 100, 3);
            MemorySegment dst = a.allocate(bytes + 200);
            WordSum sum = new WordSum();
            ChecksummedCopy.copy(src, 100, dst, 7, bytes, sum);
            assertEquals(-1, MemorySegment.mismatch(src, 100, 100 + bytes, dst, 7, 7 + bytes));
            assertEquals(WordSumTest.definition(src, 100, bytes), sum.value());
        }
    }

    @Test
    void aSumContinuedOverTwoCopiesEqualsTheSumOfTheirConcatenation() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 300_000, 4);
            MemorySegment dst = a.allocate(300_000);
            WordSum sum = new WordSum();
            ChecksummedCopy.copy(src, 0, dst, 0, 100_001, sum);
            ChecksummedCopy.copy(src, 100_001, dst, 100_001, 199_999, sum);
            assertEquals(WordSumTest.definition(src, 0, 300_000), sum.value());
            assertEquals(sum.value(), WordSum.of(dst, 0, 300_000));
        }
    }

    @Test
    void aRangeOutsideASegmentIsRefusedBeforeAnythingIsCopied() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 1000, 5);
            MemorySegment dst = a.allocate(1000);
            WordSum sum = new WordSum();
            assertThrows(IndexOutOfBoundsException.class, () -> ChecksummedCopy.copy(src, 0, dst, 1, 1000, sum));
            assertEquals(0, dst.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 1), "bytes were copied before the check");
            assertEquals(0, sum.position());
        }
    }

    @Test
    void aCompiledCopyAllocatesNothing() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = Segments.random(a, 32 * ChecksummedCopy.CHUNK_BYTES, 6);
            MemorySegment dst = a.allocate(src.byteSize());
            WordSum sum = new WordSum();
            long best = Long.MAX_VALUE;
            int calls = 500;
            for (int round = 0; round < 30; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < calls; i++) {
                    sum.reset();
                    ChecksummedCopy.copy(src, 0, dst, 0, src.byteSize(), sum);
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            assertTrue(best < calls, calls + " compiled copies of 32 chunks allocated " + best + " bytes");
        }
    }
}
