package dev.kvconnector.valkey.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/** Test values: pseudo-random bytes with a chosen first byte, and comparisons that name the first difference. */
public final class Segments {
    private Segments() {
    }

    /** {@code size} pseudo-random bytes from {@code seed}, the first one set to {@code first} (if size > 0). */
    public static MemorySegment random(Arena arena, long size, int first, long seed) {
        MemorySegment s = arena.allocate(Math.max(1, size), 64).asSlice(0, size);
        SplittableRandom r = new SplittableRandom(seed);
        long i = 0;
        for (; i + 8 <= size; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
        for (; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        if (size > 0) {
            s.set(ValueLayout.JAVA_BYTE, 0, (byte) first);
        }
        return s;
    }

    /** A zeroed destination of {@code size} bytes. */
    public static MemorySegment zeroed(Arena arena, long size) {
        return arena.allocate(Math.max(1, size), 64).asSlice(0, size);
    }

    /** -1 when the first {@code len} bytes of both are equal, else the first differing offset. */
    public static long mismatch(MemorySegment a, MemorySegment b, long len) {
        return a.asSlice(0, len).mismatch(b.asSlice(0, len));
    }
}
