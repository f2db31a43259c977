package dev.kvconnector.codec;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;

/** Helpers shared by the codec tests: byte patterns and hex fixtures in off-heap memory. */
final class CodecTestSupport {
    private CodecTestSupport() {
    }

    /** The pattern the Python fixture generator writes: byte i is (i * 37 + seed) mod 256. */
    static void fillPattern(MemorySegment segment, int seed) {
        for (long i = 0; i < segment.byteSize(); i++) {
            segment.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 37 + seed));
        }
    }

    static boolean hasPattern(MemorySegment segment, int seed) {
        for (long i = 0; i < segment.byteSize(); i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != (byte) (i * 37 + seed)) {
                return false;
            }
        }
        return true;
    }

    /** A native segment holding the bytes of a hex string. */
    static MemorySegment fromHex(Arena arena, String hex) {
        byte[] bytes = HexFormat.of().parseHex(hex);
        MemorySegment segment = arena.allocate(bytes.length);
        MemorySegment.copy(bytes, 0, segment, ValueLayout.JAVA_BYTE, 0, bytes.length);
        return segment;
    }

    static String toHex(MemorySegment segment) {
        return HexFormat.of().formatHex(segment.toArray(ValueLayout.JAVA_BYTE));
    }

    static void flipByte(MemorySegment segment, long offset) {
        segment.set(ValueLayout.JAVA_BYTE, offset, (byte) (segment.get(ValueLayout.JAVA_BYTE, offset) ^ 0x5A));
    }
}
