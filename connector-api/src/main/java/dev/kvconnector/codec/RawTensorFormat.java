package dev.kvconnector.codec;

import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** LOCAL STUB until the codecs branch lands. */
public final class RawTensorFormat {
    public static final int HEADER_BYTES = 64;
    public static final int OK = 0;
    public static final int TRUNCATED = -1;
    public static final int LAYOUT_MISMATCH = -6;
    public static final int SPEC_MISMATCH = -7;
    private RawTensorFormat() {}
    public static long encodedSize(TensorSpec spec) { return HEADER_BYTES + spec.byteSize(); }
    public static void writeHeader(MemorySegment o, TensorSpec spec, int tokens, long fp, boolean checksum) {
        o.set(ValueLayout.JAVA_INT_UNALIGNED, 0, 0x5243564B);
        o.set(ValueLayout.JAVA_LONG_UNALIGNED, 16, fp);
        o.set(ValueLayout.JAVA_LONG_UNALIGNED, 24, spec.byteSize());
        o.set(ValueLayout.JAVA_INT_UNALIGNED, 8, tokens);
    }
    public static int validate(MemorySegment o, long n, TensorSpec spec, long fp) {
        if (n < HEADER_BYTES) return TRUNCATED;
        if (fp != 0 && o.get(ValueLayout.JAVA_LONG_UNALIGNED, 16) != fp) return LAYOUT_MISMATCH;
        if (spec != null && o.get(ValueLayout.JAVA_LONG_UNALIGNED, 24) != spec.byteSize()) return SPEC_MISMATCH;
        if (n != HEADER_BYTES + o.get(ValueLayout.JAVA_LONG_UNALIGNED, 24)) return TRUNCATED;
        return OK;
    }
    public static String describe(int s) { return "status " + s; }
    public static boolean isLayoutMismatch(int s) { return s == LAYOUT_MISMATCH || s == SPEC_MISMATCH; }
    public static MemorySegment payload(MemorySegment o) { return o.asSlice(HEADER_BYTES); }
}
