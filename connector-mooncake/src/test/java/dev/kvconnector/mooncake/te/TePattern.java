package dev.kvconnector.mooncake.te;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.MemorySegment;

/** A byte pattern that differs per offset and per seed, so a misplaced or missing byte shows. */
final class TePattern {
    private TePattern() {
    }

    static byte at(long offset, long seed) {
        return (byte) (offset * 31 + (offset >>> 11) + seed * 101 + 7);
    }

    /** Fills {@code s} with the pattern of {@code seed}, offsets counted from {@code base}. */
    static void fill(MemorySegment s, long base, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(JAVA_BYTE, i, at(base + i, seed));
        }
    }

    /** The first offset of {@code s} that breaks the pattern, or -1. */
    static long firstMismatch(MemorySegment s, long base, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(JAVA_BYTE, i) != at(base + i, seed)) {
                return i;
            }
        }
        return -1;
    }

    /** The first offset of {@code s} that is not {@code value}, or -1. */
    static long firstNot(MemorySegment s, byte value) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(JAVA_BYTE, i) != value) {
                return i;
            }
        }
        return -1;
    }
}
