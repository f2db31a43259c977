package dev.kvconnector.lmcache.protocol;

/**
 * The tensor metadata that v1 carries beside a value: the LMCache {@code MemoryFormat} number, the dtype number
 * and a 4-dimensional shape (unused dimensions are 0). v0 carries none.
 *
 * @param fmt    MemoryFormat number, such as {@link LmWire#FMT_KV_2LTD}
 * @param dtype  dtype number (0 none, 1 or 2 float16, 3 bfloat16, 4 float32, 5 float64, 6 uint8, 7 float8_e4m3fn,
 *               8 float8_e5m2)
 * @param shape0 first dimension, in elements
 * @param shape1 second dimension, in elements
 * @param shape2 third dimension, in elements
 * @param shape3 fourth dimension, in elements
 */
public record LmObjectMeta(int fmt, int dtype, int shape0, int shape1, int shape2, int shape3) {
    /**
     * What requests without a value (GET, EXIST, HEALTH) and miss replies carry, as LMCache itself sends it:
     * fmt 1, dtype 2 (float16), zero shape.
     */
    public static final LmObjectMeta NONE = new LmObjectMeta(LmWire.FMT_KV_2LTD, LmWire.DTYPE_FLOAT16, 0, 0, 0, 0);

    /**
     * The metadata of an opaque byte value: fmt {@code BINARY}, dtype uint8, shape {@code [length, 0, 0, 0]}, the
     * form LMCache uses for byte memory objects.
     *
     * @param length the value's size in bytes
     */
    public static LmObjectMeta bytes(int length) {
        return new LmObjectMeta(LmWire.FMT_BINARY, LmWire.DTYPE_UINT8, length, 0, 0, 0);
    }
}
