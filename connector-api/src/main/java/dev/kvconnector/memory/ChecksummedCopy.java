package dev.kvconnector.memory;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * A copy that computes the CRC32C of the bytes it moves in the same pass: it copies {@link #CHUNK_BYTES} at a time
 * and updates the caller's {@link CRC32C} over each chunk right after its copy, while the chunk is still in the CPU
 * cache, instead of a second pass over the whole value from memory.
 *
 * <p>The JDK's CRC32C is the intrinsic (SSE4.2 / ARMv8 CRC) path when updated from a {@code ByteBuffer} over native
 * memory, which is what this uses. Measurements: {@code benchmarks/results/REPORT.md}, "Connector core: before and
 * after".
 *
 * <p>Allocation: the CRC reads through one {@code ByteBuffer} per call (or per region, with the view form), moved by
 * position and limit; C2 scalar-replaces that buffer where the call is inlined, and otherwise it is one small object
 * per call, never one per chunk. A {@code asSlice(..).asByteBuffer()} per chunk was measured at about 110 B per
 * 32 KiB block in a scatter that C2 did not inline ({@code ClaimPathBenchmark}). The CRC object is the caller's,
 * reset and reused per value.
 */
public final class ChecksummedCopy {
    /** Bytes copied, then checksummed, per step: small enough to stay in L2 between the copy and the CRC. */
    public static final long CHUNK_BYTES = 64 * 1024;
    /** The largest span one {@code ByteBuffer} view covers; a power of two keeps the views page aligned. */
    private static final long MAX_VIEW_BYTES = 1L << 30;

    private ChecksummedCopy() {
    }

    /**
     * Copies {@code bytes} bytes from {@code src} at {@code srcOffset} to {@code dst} at {@code dstOffset} (both in
     * bytes) and updates {@code crc} over them in order. The segments must not overlap.
     *
     * @throws IndexOutOfBoundsException when a range lies outside its segment (nothing is copied)
     */
    public static void copy(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes,
                            CRC32C crc) {
        java.util.Objects.checkFromIndexSize(srcOffset, bytes, src.byteSize());
        java.util.Objects.checkFromIndexSize(dstOffset, bytes, dst.byteSize());
        if (bytes <= MAX_VIEW_BYTES) {
            copy(src, srcOffset, dst, dstOffset, bytes, crc, dst.asSlice(dstOffset, bytes).asByteBuffer(), 0);
            return;
        }
        for (long done = 0; done < bytes; done += MAX_VIEW_BYTES) {
            long n = Math.min(MAX_VIEW_BYTES, bytes - done);
            copy(src, srcOffset + done, dst, dstOffset + done, n, crc, dst.asSlice(dstOffset + done, n).asByteBuffer(),
                    0);
        }
    }

    /**
     * {@link #copy(MemorySegment, long, MemorySegment, long, long, CRC32C)} for a caller that copies many ranges of
     * one region (the runs of a paged gather or scatter): the CRC reads the copied bytes through {@code view}, a
     * {@code ByteBuffer} over that region made once, at {@code viewOffset} onwards, moving only its position and
     * limit, so no object is made per chunk whatever the JIT inlines.
     *
     * @param view a buffer over the bytes being copied, on the {@code src} or the {@code dst} side
     * @param viewOffset the index in {@code view} of the range's first byte
     * @throws IndexOutOfBoundsException when a range lies outside its segment or the view
     */
    public static void copy(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes,
                            CRC32C crc, ByteBuffer view, int viewOffset) {
        java.util.Objects.checkFromIndexSize(srcOffset, bytes, src.byteSize());
        java.util.Objects.checkFromIndexSize(dstOffset, bytes, dst.byteSize());
        java.util.Objects.checkFromIndexSize(viewOffset, bytes, view.capacity());
        for (long done = 0; done < bytes; done += CHUNK_BYTES) {
            int n = (int) Math.min(CHUNK_BYTES, bytes - done);
            MemorySegment.copy(src, srcOffset + done, dst, dstOffset + done, n);
            int at = viewOffset + (int) done;
            view.limit(at + n).position(at);
            crc.update(view);
        }
    }

    /**
     * Updates {@code crc} over {@code bytes} bytes of {@code segment} from {@code offset}, without copying: for
     * values that no copy passes over (a header, a payload read in place).
     *
     * @throws IndexOutOfBoundsException when the range lies outside the segment
     */
    public static void update(CRC32C crc, MemorySegment segment, long offset, long bytes) {
        java.util.Objects.checkFromIndexSize(offset, bytes, segment.byteSize());
        for (long done = 0; done < bytes; done += MAX_VIEW_BYTES) {
            crc.update(segment.asSlice(offset + done, Math.min(MAX_VIEW_BYTES, bytes - done)).asByteBuffer());
        }
    }
}
