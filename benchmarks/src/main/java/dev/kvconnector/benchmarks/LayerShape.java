package dev.kvconnector.benchmarks;

import dev.kvconnector.layout.KVLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/** Sizes and fills the one-layer buffers every per-layer benchmark moves. */
final class LayerShape {
    /** Alignment of benchmark buffers, in bytes: a cache line, as the SDK's pools use. */
    static final long ALIGNMENT = 64;

    private LayerShape() {
    }

    /** Bytes of one layer (K and V, or the MLA latent) of {@code model} at {@code tokens} prompt tokens. */
    static long layerBytes(String model, int tokens) {
        return KVLayout.preset(model).layerBytes(tokens);
    }

    /** A segment of {@code bytes} bytes from {@code arena}, filled with reproducible random bytes. */
    static MemorySegment randomSegment(Arena arena, long bytes) {
        MemorySegment s = arena.allocate(bytes, ALIGNMENT);
        SplittableRandom r = new SplittableRandom(42);
        long i = 0;
        for (; i + 8 <= bytes; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
        for (; i < bytes; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        return s;
    }
}
