package dev.kvconnector.memory;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A copy that sums the bytes it moves ({@link WordSum}) in the same pass. Where {@link NativeCopy} is available and
 * both segments are native (the destination writable), the native loop copies and sums in one read of the source,
 * with non-temporal stores; otherwise it copies {@link #CHUNK_BYTES} at a time and adds each chunk to the caller's sum
 * right after its copy, from the destination while the chunk is still in the CPU cache, instead of a second pass
 * over the whole value from memory. Both give the same bytes and the same sum, and allocate nothing.
 *
 * <p>Measurements: {@code benchmarks/results/REPORT.md}, "Connector core: before and after".
 */
public final class ChecksummedCopy {
    /** Bytes copied, then summed, per step of the Java copy: small enough to stay in L2 between the copy and the sum. */
    public static final long CHUNK_BYTES = 64 * 1024;
    /**
     * Bytes per call of the native copy: a call holds off the JVM's safepoints while it runs ({@code critical}
     * downcall), so a long copy is cut into steps of about a hundred microseconds.
     */
    static final long NATIVE_STEP_BYTES = 1024 * 1024;

    private ChecksummedCopy() {
    }

    /**
     * Copies {@code bytes} bytes from {@code src} at {@code srcOffset} to {@code dst} at {@code dstOffset} (both in
     * bytes) and adds them to {@code sum} in order. The segments must not overlap.
     *
     * @throws IndexOutOfBoundsException when a range lies outside its segment (nothing is copied)
     */
    public static void copy(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes,
                            WordSum sum) {
        Objects.checkFromIndexSize(srcOffset, bytes, src.byteSize());
        Objects.checkFromIndexSize(dstOffset, bytes, dst.byteSize());
        if (bytes >= NativeCopy.MIN_BYTES && NativeCopy.available() && src.isNative() && dst.isNative()
                && !dst.isReadOnly()) {
            for (long done = 0; done < bytes; done += NATIVE_STEP_BYTES) {
                long n = Math.min(NATIVE_STEP_BYTES, bytes - done);
                sum.addSums(NativeCopy.copySum(src, srcOffset + done, dst, dstOffset + done, n, sum.position()), n);
            }
            return;
        }
        for (long done = 0; done < bytes; done += CHUNK_BYTES) {
            long n = Math.min(CHUNK_BYTES, bytes - done);
            MemorySegment.copy(src, srcOffset + done, dst, dstOffset + done, n);
            sum.update(dst, dstOffset + done, n);
        }
    }
}
