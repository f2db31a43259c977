package dev.kvconnector.lmcache.format;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * LMCache v1's {@code RemoteMetadata}, the header stored beside (or before) a chunk's bytes in remote stores:
 * int32 little-endian {@code length, fmt}, then per group {@code dtype, shape0, shape1, shape2, shape3}. One
 * group is the classic 28-byte form; newer LMCache releases repeat the group, and the reader must know how many
 * groups to expect (the header does not say).
 *
 * @param length the chunk's size in bytes
 * @param fmt    the MemoryFormat number (1..6)
 * @param groups one or more (dtype, shape) groups
 */
public record LmRemoteMetadata(int length, int fmt, List<Group> groups) {
    /** Size of the single-group header in bytes. */
    public static final int SINGLE_GROUP_BYTES = 28;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int GROUP_BYTES = 20;

    /**
     * One tensor group.
     *
     * @param dtype the LMCache dtype number (0 none, 1 or 2 float16, 3 bfloat16, 4 float32, 5 float64, 6 uint8,
     *              7 float8_e4m3fn, 8 float8_e5m2)
     * @param shape0 first dimension, in elements
     * @param shape1 second dimension, in elements
     * @param shape2 third dimension, in elements
     * @param shape3 fourth dimension, in elements
     */
    public record Group(int dtype, int shape0, int shape1, int shape2, int shape3) {
    }

    /** Validates counts and copies the group list. */
    public LmRemoteMetadata {
        if (groups == null || groups.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "RemoteMetadata needs at least one group").build();
        }
        groups = List.copyOf(groups);
    }

    /** A single-group header. */
    public static LmRemoteMetadata of(int length, int fmt, int dtype, int shape0, int shape1, int shape2,
                                      int shape3) {
        return new LmRemoteMetadata(length, fmt, List.of(new Group(dtype, shape0, shape1, shape2, shape3)));
    }

    /** The encoded size in bytes: 8 + 20 per group (28 for one group). */
    public int byteSize() {
        return 8 + GROUP_BYTES * groups.size();
    }

    /**
     * Writes the header at {@code offset} of {@code dst}.
     *
     * @throws KVException {@code SHAPE_MISMATCH} when {@code dst} has fewer than {@link #byteSize()} bytes there
     */
    public void encode(MemorySegment dst, long offset) {
        checkRoom(dst, offset, byteSize());
        dst.set(INT, offset, length);
        dst.set(INT, offset + 4, fmt);
        long at = offset + 8;
        for (Group g : groups) {
            dst.set(INT, at, g.dtype());
            dst.set(INT, at + 4, g.shape0());
            dst.set(INT, at + 8, g.shape1());
            dst.set(INT, at + 12, g.shape2());
            dst.set(INT, at + 16, g.shape3());
            at += GROUP_BYTES;
        }
    }

    /**
     * Reads a header of {@code groupCount} groups at {@code offset} of {@code src}.
     *
     * @throws KVException {@code CORRUPT_OBJECT} for a negative length or dimension, a format outside 1..6 or a
     *                     dtype outside 0..8; {@code SHAPE_MISMATCH} when the bytes are too few
     */
    public static LmRemoteMetadata decode(MemorySegment src, long offset, int groupCount) {
        if (groupCount < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "group count " + groupCount + " is below 1").build();
        }
        checkRoom(src, offset, 8L + (long) GROUP_BYTES * groupCount);
        int length = src.get(INT, offset);
        int fmt = src.get(INT, offset + 4);
        if (length < 0 || fmt < 1 || fmt > 6) {
            throw corrupt("length " + length + " or format " + fmt + " is out of range (length >= 0, format 1..6)");
        }
        List<Group> groups = new ArrayList<>(groupCount);
        long at = offset + 8;
        for (int i = 0; i < groupCount; i++) {
            Group g = new Group(src.get(INT, at), src.get(INT, at + 4), src.get(INT, at + 8), src.get(INT, at + 12),
                    src.get(INT, at + 16));
            if (g.dtype() < 0 || g.dtype() > 8 || (g.shape0() | g.shape1() | g.shape2() | g.shape3()) < 0) {
                throw corrupt("group " + i + " has dtype " + g.dtype() + " (0..8) or a negative dimension: " + g);
            }
            groups.add(g);
            at += GROUP_BYTES;
        }
        return new LmRemoteMetadata(length, fmt, groups);
    }

    /** The LMCache dtype number of a dtype (float16 is written as 2, as LMCache writes it). */
    public static int dtypeCode(DType dtype) {
        return switch (dtype) {
            case FP16 -> 2;
            case BF16 -> 3;
            case FP32 -> 4;
            case FP64 -> 5;
            case UINT8 -> 6;
            case FP8_E4M3 -> 7;
            case FP8_E5M2 -> 8;
            case INT8, INT32, INT64 -> throw KVException.of(ErrorCode.DTYPE_MISMATCH,
                    "LMCache's RemoteMetadata has no number for " + dtype).build();
        };
    }

    /** The dtype of an LMCache dtype number, or null for 0 (none). */
    public static DType dtypeOfCode(int code) {
        return switch (code) {
            case 0 -> null;
            case 1, 2 -> DType.FP16;
            case 3 -> DType.BF16;
            case 4 -> DType.FP32;
            case 5 -> DType.FP64;
            case 6 -> DType.UINT8;
            case 7 -> DType.FP8_E4M3;
            case 8 -> DType.FP8_E5M2;
            default -> throw corrupt("unknown LMCache dtype number " + code);
        };
    }

    private static void checkRoom(MemorySegment seg, long offset, long bytes) {
        if (offset < 0 || offset > seg.byteSize() - bytes) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "RemoteMetadata needs " + bytes + " bytes at offset "
                    + offset + " of a segment of " + seg.byteSize() + " bytes").build();
        }
    }

    private static KVException corrupt(String detail) {
        return KVException.of(ErrorCode.CORRUPT_OBJECT, "LMCache RemoteMetadata: " + detail)
                .hint("the object was not written by LMCache v1 with chunk metadata, or the group count is wrong")
                .build();
    }
}
