package dev.kvconnector.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/** Test helpers for filling and comparing segments with reproducible patterns. */
public final class Segments {
    private Segments() {
    }

    /** A segment of {@code size} bytes from {@code arena} filled from {@code seed}. */
    public static MemorySegment random(Arena arena, long size, long seed) {
        MemorySegment s = arena.allocate(Math.max(1, size), 64).asSlice(0, size);
        fill(s, seed);
        return s;
    }

    /** Fills {@code s} with bytes derived from {@code seed}. */
    public static void fill(MemorySegment s, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        long n = s.byteSize();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
        for (; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
    }

    /** Whether the first {@code n} bytes of both segments are equal. */
    public static boolean equal(MemorySegment a, MemorySegment b, long n) {
        return MemorySegment.mismatch(a, 0, n, b, 0, n) == -1;
    }
}
