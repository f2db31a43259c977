package dev.kvconnector.codec;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import dev.kvconnector.memory.WordSum;

/**
 * kvconnector's own object format: one tensor behind a fixed 64-byte little-endian header.
 *
 * <pre>
 * offset type    field
 *  0     4 bytes magic "KVCR"
 *  4     u16     version (2)
 *  6     u8      dtype id ({@link DType#id()})
 *  7     u8      rank (1..6)
 *  8     i32     tokens this object covers (0 if not applicable)
 * 12     i32     payload checksum, a {@link WordSum} (0 when {@link #FLAG_NO_CHECKSUM} is set)
 * 16     i64     layout fingerprint ({@code KVLayout.fingerprint()}, or 0)
 * 24     i64     payload bytes
 * 32     i32[6]  shape, in elements (unused dimensions 0)
 * 56     u16     flags (bit 0: {@link #FLAG_NO_CHECKSUM})
 * 58     u16     reserved, 0
 * 60     i32     CRC32C of bytes 0..59
 * 64     ...     payload: the tensor, row-major, little-endian
 * </pre>
 *
 * <p>The header sits in front of the payload so that a producer can gather KV straight into
 * {@link #payload(MemorySegment)} of a pooled staging segment and then stamp the header with
 * {@link #writeHeader}, with no extra copy. See {@code docs/raw-format.md} for a Python reader.
 *
 * <p>{@link #validate} returns a status code and never throws for bad bytes, so that the consumer's hot path
 * treats a corrupt or foreign object like a miss with a reason. The header's CRC32C is computed a byte at a time
 * from the segment and the payload's {@link WordSum} a word at a time, so that no call makes a {@code ByteBuffer}
 * view; once C2 has compiled them, {@link #writeHeader} and {@link #validate} allocate nothing.
 *
 * <p>A payload checksum costs a pass over the payload's memory on each side (write and validate), unless it is
 * fused into the copy that moves the payload anyway ({@link #writeHeaderWithSum}, {@link #verifyPayloadSum}). Turn
 * it off per object ({@code checksum = false}) where the transport already protects the bytes; the header keeps
 * its own CRC either way.
 *
 * <p>Version 2 replaced version 1's payload CRC32C with the word sum; a version 1 object reads as
 * {@link #BAD_VERSION}, a miss.
 *
 * <pre>{@code
 * MemorySegment obj = staging.asSlice(0, RawTensorFormat.encodedSize(spec));
 * gatherLayer(RawTensorFormat.payload(obj));                       // the engine writes K/V in place
 * RawTensorFormat.writeHeader(obj, spec, tokens, layout.fingerprint(), true);
 * store.put(key, obj);
 * ...
 * int status = RawTensorFormat.validate(dst, size, spec, layout.fingerprint());
 * if (status != RawTensorFormat.OK) { recompute(RawTensorFormat.describe(status)); }
 * }</pre>
 *
 * <p>Over 400 lines because the header is one layout: its write, its read and the check of every field, each with
 * the miss reason a reader names, stay beside the table above that defines them.
 */
public final class RawTensorFormat {
    /** Bytes of the header in front of the payload. */
    public static final int HEADER_BYTES = 64;
    /** The format version this class writes and reads. */
    public static final int VERSION = 2;
    /** The magic "KVCR" as a little-endian int (bytes 0..3 of every object). */
    public static final int MAGIC = 'K' | 'V' << 8 | 'C' << 16 | 'R' << 24;
    /** Flag bit: the payload carries no checksum; the payload checksum field is 0. */
    public static final int FLAG_NO_CHECKSUM = 1;

    /** The object is well formed and matches what the caller expects. */
    public static final int OK = 0;
    /** The object is shorter than its header, or than the payload its header declares. */
    public static final int TRUNCATED = -1;
    /** Bytes 0..3 are not "KVCR": not a raw-format object. */
    public static final int BAD_MAGIC = -2;
    /** A version, flag or reserved field this reader does not know: written by another format version. */
    public static final int BAD_VERSION = -3;
    /** The header CRC does not match bytes 0..59. */
    public static final int BAD_HEADER_CRC = -4;
    /** The header's CRC matches but a field is impossible: unknown dtype, rank outside 1..6, bad dimensions. */
    public static final int BAD_HEADER = -5;
    /** The payload length disagrees with the shape, or the object holds bytes beyond the payload. */
    public static final int BAD_LENGTH = -6;
    /** The dtype or shape is not the expected one. */
    public static final int SPEC_MISMATCH = -7;
    /** The layout fingerprint is not the expected one: the writer used another model or KV layout. */
    public static final int LAYOUT_MISMATCH = -8;
    /** The payload checksum does not match the payload. */
    public static final int BAD_PAYLOAD_SUM = -9;

    static final int OFF_MAGIC = 0;
    static final int OFF_VERSION = 4;
    static final int OFF_DTYPE = 6;
    static final int OFF_RANK = 7;
    static final int OFF_TOKENS = 8;
    static final int OFF_PAYLOAD_SUM = 12;
    static final int OFF_FINGERPRINT = 16;
    static final int OFF_PAYLOAD_BYTES = 24;
    static final int OFF_SHAPE = 32;
    static final int OFF_FLAGS = 56;
    static final int OFF_RESERVED = 58;
    static final int OFF_HEADER_CRC = 60;
    static final int MAX_RANK = 6;

    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** CRC32C's byte table: the reflected Castagnoli polynomial {@code 0x82F63B78}. */
    private static final int[] CRC32C_TABLE = crc32cTable();

    private RawTensorFormat() {
    }

    /** Bytes of an object holding a tensor of {@code spec}: the header plus {@code spec.byteSize()}. */
    public static long encodedSize(TensorSpec spec) {
        return HEADER_BYTES + spec.byteSize();
    }

    /** The payload of {@code object}: the slice after the header, without copying. */
    public static MemorySegment payload(MemorySegment object) {
        return object.asSlice(HEADER_BYTES);
    }

    /**
     * Stamps the header of an object whose payload already sits at offset {@link #HEADER_BYTES}.
     *
     * @param object at least {@link #encodedSize(TensorSpec)} bytes; the payload is its bytes 64..64+size-1
     * @param spec dtype and shape of the payload (rank 1..6, every dimension at most 2^31-1)
     * @param tokens the token count the object covers, or 0
     * @param layoutFingerprint {@code KVLayout.fingerprint()}, or 0 for objects tied to no layout
     * @param checksum whether to compute the payload checksum (one pass over the payload)
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} when the object is too small or the spec does not fit
     */
    public static void writeHeader(MemorySegment object, TensorSpec spec, int tokens, long layoutFingerprint,
                                   boolean checksum) {
        checkSpec(spec);
        long payloadBytes = spec.byteSize();
        if (object.byteSize() < HEADER_BYTES + payloadBytes) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "raw object segment holds " + object.byteSize()
                    + " bytes but header " + HEADER_BYTES + " + payload " + payloadBytes + " of " + spec + " need "
                    + (HEADER_BYTES + payloadBytes)).operation("encode")
                    .hint("allocate RawTensorFormat.encodedSize(spec) bytes").build();
        }
        if (tokens < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "token count " + tokens + " is negative")
                    .operation("encode").build();
        }
        int payloadSum = checksum ? WordSum.of(object, HEADER_BYTES, payloadBytes) : 0;
        stamp(object, spec, tokens, layoutFingerprint, payloadSum, checksum ? 0 : FLAG_NO_CHECKSUM);
    }

    /**
     * {@link #writeHeader} with a payload checksum the caller computed while it wrote the payload (for example
     * through {@code PagedKVCache.gather(.., WordSum)} or {@code ChecksummedCopy}), so the payload is not read a
     * second time.
     *
     * @param payloadSum {@link WordSum#value()} of a sum updated over the payload's bytes in order
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} as {@link #writeHeader} does
     */
    public static void writeHeaderWithSum(MemorySegment object, TensorSpec spec, int tokens, long layoutFingerprint,
                                          int payloadSum) {
        checkSpec(spec);
        if (object.byteSize() < HEADER_BYTES + spec.byteSize() || tokens < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "raw object segment holds " + object.byteSize()
                    + " bytes, header " + HEADER_BYTES + " + payload " + spec.byteSize() + " of " + spec
                    + " need " + (HEADER_BYTES + spec.byteSize()) + ", tokens=" + tokens + " must be >= 0")
                    .operation("encode").hint("allocate RawTensorFormat.encodedSize(spec) bytes").build();
        }
        stamp(object, spec, tokens, layoutFingerprint, payloadSum, 0);
    }

    /**
     * The payload check of {@link #validate}, for a consumer that checked the header with {@link #validateHeader}
     * and computed the payload's checksum while it scattered the payload out (no second pass).
     *
     * @param header the object's first {@link #HEADER_BYTES} bytes (or the object), already found valid
     * @param payloadSum {@link WordSum#value()} of a sum updated over the payload's bytes in order
     * @return {@link #OK}, also for an object written without a payload checksum; else {@link #BAD_PAYLOAD_SUM}
     */
    public static int verifyPayloadSum(MemorySegment header, int payloadSum) {
        if ((header.get(U16, OFF_FLAGS) & FLAG_NO_CHECKSUM) != 0) {
            return OK;
        }
        return header.get(I32, OFF_PAYLOAD_SUM) == payloadSum ? OK : BAD_PAYLOAD_SUM;
    }

    /**
     * Stamps a header, without a payload checksum ({@link #FLAG_NO_CHECKSUM}), into a {@link #HEADER_BYTES}-byte segment of
     * its own: for an object whose payload the CPU cannot read, such as one gathered in CUDA device memory and put
     * from there (GPUDirect), where the header is written on the host and copied in front of the payload.
     *
     * @param header at least {@link #HEADER_BYTES} bytes of host memory
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} when the header segment is too small or the spec does not
     *     fit
     */
    public static void writeDetachedHeader(MemorySegment header, TensorSpec spec, int tokens, long layoutFingerprint) {
        checkSpec(spec);
        if (header.byteSize() < HEADER_BYTES || tokens < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a detached header needs " + HEADER_BYTES
                    + " bytes and tokens >= 0; got " + header.byteSize() + " bytes, tokens=" + tokens)
                    .operation("encode").build();
        }
        stamp(header, spec, tokens, layoutFingerprint, 0, FLAG_NO_CHECKSUM);
    }

    private static void stamp(MemorySegment object, TensorSpec spec, int tokens, long layoutFingerprint,
                              int payloadSum, int flags) {
        long payloadBytes = spec.byteSize();
        object.set(I32, OFF_MAGIC, MAGIC);
        object.set(U16, OFF_VERSION, (short) VERSION);
        object.set(ValueLayout.JAVA_BYTE, OFF_DTYPE, (byte) spec.dtype().id());
        object.set(ValueLayout.JAVA_BYTE, OFF_RANK, (byte) spec.rank());
        object.set(I32, OFF_TOKENS, tokens);
        object.set(I32, OFF_PAYLOAD_SUM, payloadSum);
        object.set(I64, OFF_FINGERPRINT, layoutFingerprint);
        object.set(I64, OFF_PAYLOAD_BYTES, payloadBytes);
        for (int i = 0; i < MAX_RANK; i++) {
            object.set(I32, OFF_SHAPE + 4L * i, i < spec.rank() ? (int) spec.dim(i) : 0);
        }
        object.set(U16, OFF_FLAGS, (short) flags);
        object.set(U16, OFF_RESERVED, (short) 0);
        object.set(I32, OFF_HEADER_CRC, headerCrc(object));
    }

    /**
     * Copies a host tensor into the payload of {@code object} and stamps the header: the convenience form of
     * {@link #writeHeader} for callers whose data are not gathered in place.
     *
     * @return the object's size in bytes, {@link #encodedSize(TensorSpec)}
     */
    public static long write(MemorySegment object, Tensor tensor, int tokens, long layoutFingerprint,
                             boolean checksum) {
        tensor.requireHostAccessible("encode");
        long size = encodedSize(tensor.spec());
        checkSpec(tensor.spec());
        if (object.byteSize() < size) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "raw object segment holds " + object.byteSize()
                    + " bytes but " + tensor.spec() + " needs " + size).operation("encode")
                    .hint("allocate RawTensorFormat.encodedSize(spec) bytes").build();
        }
        MemorySegment.copy(tensor.segment(), 0, object, HEADER_BYTES, tensor.spec().byteSize());
        writeHeader(object, tensor.spec(), tokens, layoutFingerprint, checksum);
        return size;
    }

    /**
     * Checks an object received from a store. Never throws for bad bytes: returns {@link #OK} or a negative
     * status. Magic and version come first, so that foreign objects and other format versions are named as such;
     * then the header CRC, before any other field is trusted; then lengths (in overflow-checked {@code long}
     * arithmetic), the expected spec and fingerprint; the payload checksum last, as it is the one full pass.
     *
     * @param object the segment the object was read into
     * @param objectBytes the object's size in bytes (as the store reported it); at most {@code object.byteSize()}
     * @param expected the dtype and shape the caller needs, or null to accept any
     * @param expectedFingerprint the layout fingerprint the caller needs, or 0 to accept any
     * @return {@link #OK} or one of the negative status constants
     * @throws KVException {@link ErrorCode#INVALID_ARGUMENT} when {@code objectBytes} is negative or exceeds the segment
     */
    public static int validate(MemorySegment object, long objectBytes, TensorSpec expected, long expectedFingerprint) {
        if (objectBytes < 0 || objectBytes > object.byteSize()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "object size " + objectBytes
                    + " bytes is outside the segment of " + object.byteSize() + " bytes").operation("decode").build();
        }
        int status = checkHeader(object, objectBytes);
        if (status != OK) {
            return status;
        }
        long payloadBytes = object.get(I64, OFF_PAYLOAD_BYTES);
        if (payloadBytes > objectBytes - HEADER_BYTES) {
            return TRUNCATED;
        }
        if (payloadBytes < objectBytes - HEADER_BYTES) {
            return BAD_LENGTH;
        }
        if (expected != null && !matches(object, expected)) {
            return SPEC_MISMATCH;
        }
        if (expectedFingerprint != 0 && object.get(I64, OFF_FINGERPRINT) != expectedFingerprint) {
            return LAYOUT_MISMATCH;
        }
        if ((object.get(U16, OFF_FLAGS) & FLAG_NO_CHECKSUM) == 0
                && WordSum.of(object, HEADER_BYTES, payloadBytes) != object.get(I32, OFF_PAYLOAD_SUM)) {
            return BAD_PAYLOAD_SUM;
        }
        return OK;
    }

    /**
     * {@link #validate} for an object whose payload the CPU cannot read (read into CUDA device memory): checks
     * {@code header}, a host copy of the object's first {@link #HEADER_BYTES} bytes, against the object's size, the
     * expected spec and fingerprint, but not the payload checksum, which would need the payload on the host. The
     * transport (RDMA's own CRC) protects those bytes instead.
     *
     * @param header a host copy of the object's header, at least {@link #HEADER_BYTES} bytes
     * @param objectBytes the object's size in bytes, as the store reported it
     * @return {@link #OK} or one of the negative status constants (never {@link #BAD_PAYLOAD_SUM})
     */
    public static int validateHeader(MemorySegment header, long objectBytes, TensorSpec expected,
                                     long expectedFingerprint) {
        if (header.byteSize() < HEADER_BYTES) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a header copy needs " + HEADER_BYTES + " bytes, not "
                    + header.byteSize()).operation("decode").build();
        }
        int status = checkHeader(header, Math.min(objectBytes, HEADER_BYTES));
        if (status != OK) {
            return status;
        }
        long payloadBytes = header.get(I64, OFF_PAYLOAD_BYTES);
        if (payloadBytes > objectBytes - HEADER_BYTES) {
            return TRUNCATED;
        }
        if (payloadBytes < objectBytes - HEADER_BYTES) {
            return BAD_LENGTH;
        }
        if (expected != null && !matches(header, expected)) {
            return SPEC_MISMATCH;
        }
        if (expectedFingerprint != 0 && header.get(I64, OFF_FINGERPRINT) != expectedFingerprint) {
            return LAYOUT_MISMATCH;
        }
        return OK;
    }

    /**
     * Reads every header field, for tools and diagnostics (allocates). The payload itself is not checked.
     *
     * @throws KVException {@link ErrorCode#CORRUPT_OBJECT} when the header is truncated, foreign or corrupt
     */
    public static RawHeader readHeader(MemorySegment object) {
        int status = checkHeader(object, object.byteSize());
        if (status != OK) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "raw object of " + object.byteSize()
                    + " bytes has an invalid header: " + describe(status)).operation("decode")
                    .hint("the object was not written by RawTensorFormat version " + VERSION
                            + ", or its bytes were damaged in the store or in transit").build();
        }
        int rank = object.get(ValueLayout.JAVA_BYTE, OFF_RANK);
        long[] shape = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = object.get(I32, OFF_SHAPE + 4L * i);
        }
        DType dtype = DType.byIdOrNull(Byte.toUnsignedInt(object.get(ValueLayout.JAVA_BYTE, OFF_DTYPE)));
        return new RawHeader(VERSION, TensorSpec.of(dtype, shape), object.get(I32, OFF_TOKENS),
                object.get(I64, OFF_FINGERPRINT), object.get(I64, OFF_PAYLOAD_BYTES),
                Short.toUnsignedInt(object.get(U16, OFF_FLAGS)), object.get(I32, OFF_PAYLOAD_SUM),
                object.get(I32, OFF_HEADER_CRC));
    }

    /** A short English description of a status, for logs and miss reasons. */
    public static String describe(int status) {
        return switch (status) {
            case OK -> "ok";
            case TRUNCATED -> "truncated: shorter than its header or declared payload";
            case BAD_MAGIC -> "bad magic: not a KVCR raw tensor object";
            case BAD_VERSION -> "unsupported version, flags or reserved bits: written by another format version";
            case BAD_HEADER_CRC -> "header CRC32C mismatch: header bytes damaged";
            case BAD_HEADER -> "invalid header field (dtype, rank or shape) despite a valid header CRC";
            case BAD_LENGTH -> "payload length disagrees with the shape or the object size";
            case SPEC_MISMATCH -> "dtype or shape differs from the expected tensor spec";
            case LAYOUT_MISMATCH -> "layout fingerprint differs: written for another model or KV layout";
            case BAD_PAYLOAD_SUM -> "payload checksum mismatch: payload bytes damaged";
            default -> "unknown status " + status;
        };
    }

    /** Whether the status says the object is intact but was written for another layout, dtype or shape. */
    public static boolean isLayoutMismatch(int status) {
        return status == LAYOUT_MISMATCH || status == SPEC_MISMATCH;
    }

    /** Whether the status says the object's bytes are damaged or not a raw object at all. */
    public static boolean isCorrupt(int status) {
        return status == TRUNCATED || status == BAD_MAGIC || status == BAD_HEADER_CRC || status == BAD_HEADER
                || status == BAD_LENGTH || status == BAD_PAYLOAD_SUM;
    }

    /**
     * Checks the header alone against {@code objectBytes}: everything but the payload length's agreement with the
     * object size, the expectations and the payload checksum.
     */
    private static int checkHeader(MemorySegment object, long objectBytes) {
        if (objectBytes < HEADER_BYTES) {
            return TRUNCATED;
        }
        if (object.get(I32, OFF_MAGIC) != MAGIC) {
            return BAD_MAGIC;
        }
        if (object.get(U16, OFF_VERSION) != VERSION) {
            return BAD_VERSION;
        }
        if (headerCrc(object) != object.get(I32, OFF_HEADER_CRC)) {
            return BAD_HEADER_CRC;
        }
        int flags = Short.toUnsignedInt(object.get(U16, OFF_FLAGS));
        if ((flags & ~FLAG_NO_CHECKSUM) != 0 || object.get(U16, OFF_RESERVED) != 0) {
            return BAD_VERSION;
        }
        if ((flags & FLAG_NO_CHECKSUM) != 0 && object.get(I32, OFF_PAYLOAD_SUM) != 0) {
            return BAD_HEADER;
        }
        DType dtype = DType.byIdOrNull(Byte.toUnsignedInt(object.get(ValueLayout.JAVA_BYTE, OFF_DTYPE)));
        int rank = Byte.toUnsignedInt(object.get(ValueLayout.JAVA_BYTE, OFF_RANK));
        if (dtype == null || rank < 1 || rank > MAX_RANK || object.get(I32, OFF_TOKENS) < 0) {
            return BAD_HEADER;
        }
        long bytes = dtype.byteWidth();
        for (int i = 0; i < MAX_RANK; i++) {
            long dim = object.get(I32, OFF_SHAPE + 4L * i);
            if (dim < 0 || (i >= rank && dim != 0)) {
                return BAD_HEADER;
            }
            if (i < rank) {
                // Six dims of up to 2^31-1 can pass 2^63: multiplyHigh catches the overflow without throwing.
                long product = bytes * dim;
                if (Math.multiplyHigh(bytes, dim) != 0 || product < 0) {
                    return BAD_LENGTH;
                }
                bytes = product;
            }
        }
        if (object.get(I64, OFF_PAYLOAD_BYTES) != bytes) {
            return BAD_LENGTH;
        }
        return OK;
    }

    private static boolean matches(MemorySegment object, TensorSpec expected) {
        if (Byte.toUnsignedInt(object.get(ValueLayout.JAVA_BYTE, OFF_DTYPE)) != expected.dtype().id()
                || Byte.toUnsignedInt(object.get(ValueLayout.JAVA_BYTE, OFF_RANK)) != expected.rank()) {
            return false;
        }
        for (int i = 0; i < expected.rank(); i++) {
            if (object.get(I32, OFF_SHAPE + 4L * i) != expected.dim(i)) {
                return false;
            }
        }
        return true;
    }

    private static void checkSpec(TensorSpec spec) {
        if (spec.rank() < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "raw objects need rank 1.." + MAX_RANK
                    + ", got a scalar " + spec).operation("encode").hint("reshape the scalar to [1]").build();
        }
        for (int i = 0; i < spec.rank(); i++) {
            if (spec.dim(i) > Integer.MAX_VALUE) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "dimension " + i + " of " + spec + " is "
                        + spec.dim(i) + ", above the raw format's i32 limit " + Integer.MAX_VALUE)
                        .operation("encode").build();
            }
        }
    }

    /**
     * CRC32C of the header's bytes 0..59, a byte at a time from the segment. Hand-rolled (the table of the
     * Castagnoli polynomial, as {@code java.util.zip.CRC32C.update(int)} does it) because the JDK's faster forms
     * take a {@code ByteBuffer} or a {@code byte[]}, a view over native memory is an object per call, and a
     * {@code CRC32C} instance per header was not scalar-replaced in the connector's drop-select (JFR allocation
     * samples); 60 table steps cost well under a microsecond. {@code RawTensorFormatTest} checks it against the JDK.
     */
    static int headerCrc(MemorySegment object) {
        int crc = ~0;
        for (int i = 0; i < OFF_HEADER_CRC; i++) {
            crc = (crc >>> 8) ^ CRC32C_TABLE[(crc ^ object.get(ValueLayout.JAVA_BYTE, i)) & 0xFF];
        }
        return ~crc;
    }

    private static int[] crc32cTable() {
        int[] table = new int[256];
        for (int n = 0; n < 256; n++) {
            int c = n;
            for (int k = 0; k < 8; k++) {
                c = (c >>> 1) ^ (0x82F63B78 & -(c & 1));
            }
            table[n] = c;
        }
        return table;
    }
}
