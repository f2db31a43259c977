package dev.kvconnector.memory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * The raw format's payload checksum ("word sum"): the payload read as little-endian 32-bit words, the last one
 * zero-padded; the words at even and at odd word positions summed apart modulo 2^32; the checksum is
 * {@code evenSum + 3 * oddSum} modulo 2^32.
 *
 * <p>What it detects: every error confined to one aligned 32-bit word of the payload, so every flipped bit and every
 * damaged byte. Such an error changes one of the two sums by some {@code d != 0 (mod 2^32)}, and the checksum by
 * {@code d} or {@code 3d}; 1 and 3 are odd, so units modulo 2^32, and neither is 0. What it does not detect: errors
 * in several words that cancel (the same amount added to one word and taken from another of the same parity), and
 * words swapped with words of the same parity. The header's CRC32C and the layout fingerprint catch an object written
 * for another tensor; this sum catches damaged bytes.
 *
 * <p>Why not CRC32C, the format's payload check before version 2: the JDK computes CRC32C only through a
 * {@code ByteBuffer} or a {@code byte[]}, so over native memory every update made a buffer object, and fused into a
 * copy it cost about 1.5x a cache-hot copy of a layer, where this sum, over the bytes just copied, costs 1.1-1.3x
 * ({@code ChecksumFusionBenchmark}; numbers in {@code benchmarks/results/REPORT.md}).
 *
 * <p>The sum is linear: updates may split the payload anywhere, as long as they come in payload order, and each byte
 * is read once. An aligned run (from a payload position that is a multiple of 8) is summed eight bytes at a time; the
 * few bytes before and after it one at a time. An instance is mutable, not thread-safe, and allocation-free: a
 * session keeps one and {@link #reset}s it per object.
 */
public final class WordSum {
    private static final ValueLayout.OfLong WORD_PAIR = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final long LOW_WORD = 0xFFFF_FFFFL;
    /** Each thread's sum for {@link #of}. */
    private static final ThreadLocal<WordSum> CURRENT = ThreadLocal.withInitial(WordSum::new);

    private long even;
    private long odd;
    private long position;

    /** Starts over, as for a new payload. */
    public void reset() {
        even = 0;
        odd = 0;
        position = 0;
    }

    /** Bytes summed since the last {@link #reset}. */
    public long position() {
        return position;
    }

    /**
     * Adds {@code bytes} bytes of {@code segment} from {@code offset}, as the payload's next bytes.
     *
     * @throws IndexOutOfBoundsException when the range lies outside the segment (nothing is added)
     */
    public void update(MemorySegment segment, long offset, long bytes) {
        Objects.checkFromIndexSize(offset, bytes, segment.byteSize());
        long at = offset;
        long end = offset + bytes;
        while (at < end && (position & 7) != 0) {
            addByte(segment.get(ValueLayout.JAVA_BYTE, at++));
        }
        long runEnd = at + ((end - at) & ~7L);
        long e = 0;
        long o = 0;
        for (long i = at; i < runEnd; i += 8) {
            long pair = segment.get(WORD_PAIR, i);
            e += pair & LOW_WORD;
            o += pair >>> 32;
        }
        even += e;
        odd += o;
        position += runEnd - at;
        for (at = runEnd; at < end; at++) {
            addByte(segment.get(ValueLayout.JAVA_BYTE, at));
        }
    }

    /**
     * Adds the sums of the payload's next {@code bytes} bytes, summed elsewhere ({@link NativeCopy}): the even words'
     * sum modulo 2^32 in the low half of {@code packedSums}, the odd words' in the high half.
     */
    void addSums(long packedSums, long bytes) {
        even += packedSums & LOW_WORD;
        odd += packedSums >>> 32;
        position += bytes;
    }

    /** The checksum of the bytes summed so far. */
    public int value() {
        return (int) even + 3 * (int) odd;
    }

    /**
     * The checksum of {@code bytes} bytes of {@code segment} from {@code offset}, in one call; with the calling
     * thread's own sum, so that it allocates nothing.
     */
    public static int of(MemorySegment segment, long offset, long bytes) {
        WordSum sum = CURRENT.get();
        sum.reset();
        sum.update(segment, offset, bytes);
        return sum.value();
    }

    private void addByte(byte b) {
        long shifted = (b & 0xFFL) << ((position & 3) << 3);
        if ((position & 4) == 0) {
            even += shifted;
        } else {
            odd += shifted;
        }
        position++;
    }
}
