package dev.kvconnector.store.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Self-checking values for tests: word 0 holds a seed, word 1 the length in bytes, and every later 8-byte word a
 * mix of the seed and its index. A reader can verify every byte it got without knowing what was written, so a
 * value torn between two writes, or cut short, is always caught.
 */
final class ValuePattern {
    private ValuePattern() {
    }

    /** Fills {@code len} bytes (a multiple of 8, at least 16) of {@code seg}. */
    static void fill(MemorySegment seg, long len, long seed) {
        seg.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed);
        seg.set(ValueLayout.JAVA_LONG_UNALIGNED, 8, len);
        for (long i = 2; i < len / 8; i++) {
            seg.set(ValueLayout.JAVA_LONG_UNALIGNED, i * 8, word(seed, i));
        }
    }

    /** Null when the first {@code len} bytes are a whole pattern value; otherwise what is wrong. */
    static String verify(MemorySegment seg, long len) {
        if (len < 16 || len % 8 != 0) {
            return "length " + len + " is not a pattern length";
        }
        long seed = seg.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        long recorded = seg.get(ValueLayout.JAVA_LONG_UNALIGNED, 8);
        if (recorded != len) {
            return "value says it is " + recorded + " bytes, the store returned " + len;
        }
        for (long i = 2; i < len / 8; i++) {
            long w = seg.get(ValueLayout.JAVA_LONG_UNALIGNED, i * 8);
            if (w != word(seed, i)) {
                return "word " + i + " of " + len / 8 + " does not belong to seed " + seed;
            }
        }
        return null;
    }

    /** The seed of a value. */
    static long seed(MemorySegment seg) {
        return seg.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }

    private static long word(long seed, long i) {
        long h = seed * 0x9E3779B97F4A7C15L + i;
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return h;
    }
}
