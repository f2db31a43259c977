package dev.kvconnector.connector;

import dev.kvconnector.codec.TensorPlacement;
import java.lang.foreign.MemorySegment;

/**
 * Copies between a contiguous {@code [tokens, heads, headBytes]} tensor and a strided {@link TensorPlacement} (for
 * example LMCache's {@code huggingface} layout, heads before tokens), one head row at a time.
 */
final class StridedCopy {
    private StridedCopy() {
    }

    /** Copies contiguous {@code src} from offset 0 into {@code dst}, whose placement starts at {@code base}. */
    static void toPlacement(MemorySegment src, MemorySegment dst, long base, TensorPlacement p) {
        long row = p.heads() * p.headBytes();
        for (int t = 0; t < p.tokens(); t++) {
            for (int h = 0; h < p.heads(); h++) {
                MemorySegment.copy(src, t * row + h * p.headBytes(), dst,
                        base + t * p.tokenStride() + h * p.headStride(), p.headBytes());
            }
        }
    }

    /** Copies the placement starting at {@code base} in {@code src} into contiguous {@code dst} from offset 0. */
    static void fromPlacement(MemorySegment src, long base, TensorPlacement p, MemorySegment dst) {
        long row = p.heads() * p.headBytes();
        for (int t = 0; t < p.tokens(); t++) {
            for (int h = 0; h < p.heads(); h++) {
                MemorySegment.copy(src, base + t * p.tokenStride() + h * p.headStride(), dst,
                        t * row + h * p.headBytes(), p.headBytes());
            }
        }
    }
}
