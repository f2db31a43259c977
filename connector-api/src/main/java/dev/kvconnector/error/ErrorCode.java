package dev.kvconnector.error;

/**
 * What went wrong, as a stable code that callers may switch on. Each code belongs to a {@link Category}
 * that says whether retrying can help.
 */
public enum ErrorCode {
    /** An argument broke the contract of the call: a negative size, a null key, a wrong shape. */
    INVALID_ARGUMENT(Category.USAGE),
    /** A tensor's dtype is not the one the layout or the object declares. */
    DTYPE_MISMATCH(Category.USAGE),
    /** A tensor's shape or byte size is not the one the layout or the object declares. */
    SHAPE_MISMATCH(Category.USAGE),
    /** A store URI could not be parsed, or names an option that does not exist. */
    INVALID_URI(Category.CONFIGURATION),
    /** No store provider on the class path handles the URI's scheme. */
    UNKNOWN_STORE(Category.CONFIGURATION),
    /** A configuration value (kv_transfer_config, mooncake.json, a URI option) is invalid. */
    INVALID_CONFIG(Category.CONFIGURATION),
    /** A native library the store needs could not be found or loaded. */
    NATIVE_LIBRARY_MISSING(Category.CONFIGURATION),
    /** The memory kind of a tensor (for example CUDA device memory) is not supported by this path. */
    UNSUPPORTED_MEMORY(Category.USAGE),
    /** The operation is not supported by this store or this build. */
    UNSUPPORTED(Category.USAGE),
    /** An object's bytes fail validation: bad magic, bad lengths, bad checksum. */
    CORRUPT_OBJECT(Category.DATA),
    /** A value is larger than the store accepts. */
    VALUE_TOO_LARGE(Category.USAGE),
    /** The store has no room left and could not make any. */
    STORE_FULL(Category.TRANSIENT),
    /** The store could not be reached or the connection broke. */
    STORE_UNREACHABLE(Category.TRANSIENT),
    /** The store refused the credentials. */
    AUTH_FAILED(Category.CONFIGURATION),
    /** A deadline passed before the store answered. */
    TIMEOUT(Category.TRANSIENT),
    /** The peer sent bytes that break the protocol. */
    PROTOCOL_ERROR(Category.DATA),
    /** The store or the object is busy (for example leased) and the call may succeed later. */
    BUSY(Category.TRANSIENT),
    /** The store, connector or session was already closed. */
    CLOSED(Category.USAGE),
    /** An I/O error outside the store protocol (files, sockets). */
    IO_ERROR(Category.TRANSIENT),
    /** The store reported an error that maps to no other code; the native code is attached. */
    STORE_ERROR(Category.DATA),
    /** A bug in kvconnector or in a native library. */
    INTERNAL(Category.INTERNAL);

    /** Whether a caller can fix the cause, and whether a retry can help. */
    public enum Category {
        /** The caller passed something wrong; retrying the same call fails the same way. */
        USAGE,
        /** The deployment or configuration is wrong; fix the setting named in the hint. */
        CONFIGURATION,
        /** The condition may pass; a retry with back-off can succeed. */
        TRANSIENT,
        /** Stored or received bytes are wrong. */
        DATA,
        /** A defect. */
        INTERNAL
    }

    private final Category category;

    ErrorCode(Category category) {
        this.category = category;
    }

    /** The category of this code. */
    public Category category() {
        return category;
    }
}
