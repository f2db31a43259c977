package dev.kvconnector.lmcache.protocol;

/**
 * Constants of the LMCache server protocol: command and reply codes, the key field size and the v1 location and
 * memory-format numbers. All integers on the wire are int32 little-endian with no padding.
 */
public final class LmWire {
    /** Size of the key field in bytes; shorter keys are padded with spaces (0x20). */
    public static final int KEY_BYTES = 150;
    /** The padding byte of the key field. */
    public static final byte KEY_PAD = 0x20;

    /** Request: store {@code length} payload bytes that follow the header. No reply. */
    public static final int PUT = 1;
    /** Request: fetch a value. Reply SUCCESS with the value's length and bytes, or FAIL with length 0. */
    public static final int GET = 2;
    /** Request: does the key exist. Reply SUCCESS or FAIL, length 0. */
    public static final int EXIST = 3;
    /** Request (v0 only): list the keys. Reply SUCCESS with the keys joined by {@code '\n'} in UTF-8. */
    public static final int LIST = 4;
    /** Request (v1 only): is the server alive. Reply SUCCESS, length 0. */
    public static final int HEALTH = 5;

    /** Reply code of success. */
    public static final int SUCCESS = 200;
    /** Reply code of failure or miss. */
    public static final int FAIL = 400;

    /** v1 location: none. Servers reply with it. */
    public static final int LOCATION_NONE = 0;
    /** v1 location: LMCache's {@code LocalCPUBackend}. */
    public static final int LOCATION_LOCAL_CPU = 1;
    /** v1 location: LMCache's {@code LocalDiskBackend}. */
    public static final int LOCATION_LOCAL_DISK = 2;

    /** v1 MemoryFormat {@code KV_2LTD}: {@code [2, L, T, H*D]}, the normal chunk. */
    public static final int FMT_KV_2LTD = 1;
    /** v1 MemoryFormat {@code KV_T2D}. */
    public static final int FMT_KV_T2D = 2;
    /** v1 MemoryFormat {@code KV_2TD}. */
    public static final int FMT_KV_2TD = 3;
    /** v1 MemoryFormat {@code BINARY}: opaque bytes, shape {@code [length, 0, 0, 0]}. */
    public static final int FMT_BINARY = 4;
    /** v1 MemoryFormat {@code BINARY_BUFFER}. */
    public static final int FMT_BINARY_BUFFER = 5;
    /** v1 MemoryFormat {@code KV_MLA_FMT}: {@code [1, L, T, D]}. */
    public static final int FMT_KV_MLA = 6;

    /** v1 dtype number of {@code torch.float16}, as a server's miss reply carries it. */
    public static final int DTYPE_FLOAT16 = 2;
    /** v1 dtype number of {@code torch.uint8}, used for opaque bytes. */
    public static final int DTYPE_UINT8 = 6;

    private LmWire() {
    }

    /** A readable name for a command code, for messages; unknown codes read as {@code UNKNOWN(n)}. */
    public static String commandName(int command) {
        return switch (command) {
            case PUT -> "PUT";
            case GET -> "GET";
            case EXIST -> "EXIST";
            case LIST -> "LIST";
            case HEALTH -> "HEALTH";
            default -> "UNKNOWN(" + command + ")";
        };
    }
}
