package dev.kvconnector.lmcache.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A request header, reusable across requests so that a connection encodes and decodes without allocating.
 *
 * <p>v0 layout, 158 bytes: {@code command, length, key[150]}. v1 layout, 186 bytes:
 * {@code command, length, fmt, dtype, location, shape0, shape1, shape2, shape3, key[150]}. Integers are int32
 * little-endian; {@code length} is the payload size in bytes (PUT) or 0.
 */
public final class LmRequestHeader {
    private int command;
    private int length;
    private LmObjectMeta meta = LmObjectMeta.NONE;
    private int location = LmWire.LOCATION_NONE;
    private String key;

    /** Sets every field; v0 ignores {@code meta} and {@code location}. Returns this header. */
    public LmRequestHeader set(int command, String key, int length, LmObjectMeta meta, int location) {
        this.command = command;
        this.key = key;
        this.length = length;
        this.meta = meta;
        this.location = location;
        return this;
    }

    /** Sets a request without a payload: length 0, {@link LmObjectMeta#NONE}, no location. Returns this header. */
    public LmRequestHeader set(int command, String key) {
        return set(command, key, 0, LmObjectMeta.NONE, LmWire.LOCATION_NONE);
    }

    /**
     * Writes this header into {@code dst} from index 0 and leaves {@code dst} ready to write to a channel
     * (position 0, limit = header size). {@code dst} is switched to little-endian order.
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} when the key cannot be sent unchanged
     */
    public void encode(LmProtocolVersion version, ByteBuffer dst) {
        dst.order(ByteOrder.LITTLE_ENDIAN).clear();
        dst.putInt(0, command).putInt(4, length);
        int keyAt = 8;
        if (version == LmProtocolVersion.V1) {
            dst.putInt(8, meta.fmt()).putInt(12, meta.dtype()).putInt(16, location)
                    .putInt(20, meta.shape0()).putInt(24, meta.shape1())
                    .putInt(28, meta.shape2()).putInt(32, meta.shape3());
            keyAt = 36;
        }
        LmKeyField.encode(key, dst, keyAt);
        dst.limit(version.requestHeaderBytes());
    }

    /**
     * Reads a header from {@code src} at indices 0 to the header size (absolute; position unchanged). The command
     * and length are not validated here: the caller decides what an unknown command or a negative length means.
     *
     * @throws dev.kvconnector.error.KVException {@code PROTOCOL_ERROR} when the key field is not UTF-8
     */
    public LmRequestHeader decode(LmProtocolVersion version, ByteBuffer src) {
        src.order(ByteOrder.LITTLE_ENDIAN);
        command = src.getInt(0);
        length = src.getInt(4);
        if (version == LmProtocolVersion.V1) {
            meta = new LmObjectMeta(src.getInt(8), src.getInt(12), src.getInt(20), src.getInt(24), src.getInt(28),
                    src.getInt(32));
            location = src.getInt(16);
            key = LmKeyField.decode(src, 36);
        } else {
            meta = LmObjectMeta.NONE;
            location = LmWire.LOCATION_NONE;
            key = LmKeyField.decode(src, 8);
        }
        return this;
    }

    /** The command code (see {@link LmWire}). */
    public int command() {
        return command;
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

    /** The key, with padding stripped. */
    public String key() {
        return key;
    }

    @Override
    public String toString() {
        return LmWire.commandName(command) + " length=" + length + " key=" + key + " " + meta + " location="
                + location;
    }
}
