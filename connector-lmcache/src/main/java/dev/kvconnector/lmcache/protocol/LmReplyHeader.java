package dev.kvconnector.lmcache.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A reply header, reusable across replies.
 *
 * <p>v0 layout, 8 bytes: {@code code, length}. v1 layout, 36 bytes:
 * {@code code, length, fmt, dtype, shape0, shape1, shape2, shape3, location}. Note that v1 puts {@code location}
 * last here, while the request puts it before the shape. Integers are int32 little-endian; {@code length} is the
 * size in bytes of the payload that follows.
 */
public final class LmReplyHeader {
    private int code;
    private int length;
    private LmObjectMeta meta = LmObjectMeta.NONE;
    private int location = LmWire.LOCATION_NONE;

    /** Sets every field; v0 ignores {@code meta} and {@code location}. Returns this header. */
    public LmReplyHeader set(int code, int length, LmObjectMeta meta, int location) {
        this.code = code;
        this.length = length;
        this.meta = meta;
        this.location = location;
        return this;
    }

    /** Sets a reply without a value: {@link LmObjectMeta#NONE}, no location. Returns this header. */
    public LmReplyHeader set(int code, int length) {
        return set(code, length, LmObjectMeta.NONE, LmWire.LOCATION_NONE);
    }

    /**
     * Writes this header into {@code dst} from index 0 and leaves it ready to write to a channel (position 0,
     * limit = header size). {@code dst} is switched to little-endian order.
     */
    public void encode(LmProtocolVersion version, ByteBuffer dst) {
        dst.order(ByteOrder.LITTLE_ENDIAN).clear();
        dst.putInt(0, code).putInt(4, length);
        if (version == LmProtocolVersion.V1) {
            dst.putInt(8, meta.fmt()).putInt(12, meta.dtype())
                    .putInt(16, meta.shape0()).putInt(20, meta.shape1())
                    .putInt(24, meta.shape2()).putInt(28, meta.shape3())
                    .putInt(32, location);
        }
        dst.limit(version.replyHeaderBytes());
    }

    /** Reads a header from {@code src} at indices 0 to the header size (absolute). Nothing is validated here. */
    public LmReplyHeader decode(LmProtocolVersion version, ByteBuffer src) {
        src.order(ByteOrder.LITTLE_ENDIAN);
        code = src.getInt(0);
        length = src.getInt(4);
        if (version == LmProtocolVersion.V1) {
            int fmt = src.getInt(8);
            int dtype = src.getInt(12);
            int s0 = src.getInt(16);
            int s1 = src.getInt(20);
            int s2 = src.getInt(24);
            int s3 = src.getInt(28);
            meta = isNone(fmt, dtype, s0, s1, s2, s3) ? LmObjectMeta.NONE
                    : new LmObjectMeta(fmt, dtype, s0, s1, s2, s3);
            location = src.getInt(32);
        } else {
            meta = LmObjectMeta.NONE;
            location = LmWire.LOCATION_NONE;
        }
        return this;
    }

    private static boolean isNone(int fmt, int dtype, int s0, int s1, int s2, int s3) {
        return fmt == LmWire.FMT_KV_2LTD && dtype == LmWire.DTYPE_FLOAT16 && (s0 | s1 | s2 | s3) == 0;
    }

    /** The reply code: {@link LmWire#SUCCESS} or {@link LmWire#FAIL} from a well-behaved server. */
    public int code() {
        return code;
    }

    /** The payload length in bytes. */
    public int length() {
        return length;
    }

    /** The v1 metadata ({@link LmObjectMeta#NONE} for v0). */
    public LmObjectMeta meta() {
        return meta;
    }

    /** The v1 location number. */
    public int location() {
        return location;
    }

    @Override
    public String toString() {
        return "code=" + code + " length=" + length + " " + meta + " location=" + location;
    }
}
