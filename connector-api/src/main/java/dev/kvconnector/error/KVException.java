package dev.kvconnector.error;

/**
 * The one exception type of kvconnector. Every instance names a {@link ErrorCode}, and where they apply the
 * store URI (with secrets masked), the operation, a shortened key and a hint that says what to check.
 *
 * <p>Misses are never exceptions: they are results. This type is for failures.
 */
public class KVException extends RuntimeException {
    private static final int MAX_KEY_CHARS = 48;

    private final ErrorCode code;
    private final String storeUri;
    private final String operation;
    private final String key;
    private final String hint;
    private final long nativeCode;

    private KVException(Builder b) {
        super(format(b), b.cause);
        this.code = b.code;
        this.storeUri = b.storeUri;
        this.operation = b.operation;
        this.key = b.key == null ? null : shortenKey(b.key);
        this.hint = b.hint;
        this.nativeCode = b.nativeCode;
    }

    /** Starts an exception with the given code and detail message. */
    public static Builder of(ErrorCode code, String detail) {
        return new Builder(code, detail);
    }

    /** The error code. */
    public ErrorCode code() {
        return code;
    }

    /** The store URI with secrets masked, or null when no store was involved. */
    public String storeUri() {
        return storeUri;
    }

    /** The operation, such as {@code put} or {@code dropSelect}, or null. */
    public String operation() {
        return operation;
    }

    /** The key, shortened to at most 48 characters, or null. */
    public String key() {
        return key;
    }

    /** What to check or change, or null. */
    public String hint() {
        return hint;
    }

    /** The store's own error code (for example Mooncake's -200), or 0 when there is none. */
    public long nativeCode() {
        return nativeCode;
    }

    /** Shortens a key for messages: long keys keep their head and tail around an ellipsis. */
    public static String shortenKey(String key) {
        if (key.length() <= MAX_KEY_CHARS) {
            return key;
        }
        int head = MAX_KEY_CHARS / 2;
        int tail = MAX_KEY_CHARS - head - 3;
        return key.substring(0, head) + "..." + key.substring(key.length() - tail);
    }

    private static String format(Builder b) {
        StringBuilder sb = new StringBuilder();
        sb.append('[').append(b.code).append("] ");
        if (b.operation != null) {
            sb.append(b.operation).append(": ");
        }
        sb.append(b.detail);
        if (b.key != null) {
            sb.append(" (key ").append(shortenKey(b.key)).append(')');
        }
        if (b.storeUri != null) {
            sb.append(" on ").append(b.storeUri);
        }
        if (b.nativeCode != 0) {
            sb.append(" [native code ").append(b.nativeCode).append(']');
        }
        if (b.hint != null) {
            sb.append(". Hint: ").append(b.hint);
        }
        return sb.toString();
    }

    /** Collects the fields of a {@link KVException}. */
    public static final class Builder {
        private final ErrorCode code;
        private final String detail;
        private String storeUri;
        private String operation;
        private String key;
        private String hint;
        private long nativeCode;
        private Throwable cause;

        private Builder(ErrorCode code, String detail) {
            this.code = code;
            this.detail = detail;
        }

        /** The store URI; pass it masked (see {@code StoreUri.masked()}). */
        public Builder store(String maskedUri) {
            this.storeUri = maskedUri;
            return this;
        }

        /** The operation that failed. */
        public Builder operation(String operation) {
            this.operation = operation;
            return this;
        }

        /** The key involved; it is shortened in the message. */
        public Builder key(String key) {
            this.key = key;
            return this;
        }

        /** What the user should check. */
        public Builder hint(String hint) {
            this.hint = hint;
            return this;
        }

        /** The store's native error code. */
        public Builder nativeCode(long nativeCode) {
            this.nativeCode = nativeCode;
            return this;
        }

        /** The underlying cause. */
        public Builder cause(Throwable cause) {
            this.cause = cause;
            return this;
        }

        /** Builds the exception. */
        public KVException build() {
            return new KVException(this);
        }
    }
}
