package dev.kvconnector.store;

/**
 * The {@code int} codes that {@link KVStore#tryClaim} returns, without allocating. A claim that did not succeed is
 * back-pressure or a lost race, not a failure: the hot path branches on the code instead of catching an exception,
 * as with Agrona's {@code RingBuffer.INSUFFICIENT_CAPACITY} and Aeron's {@code Publication.BACK_PRESSURED}.
 */
public final class ClaimResult {
    /** The claim holds a writable segment of the requested size. */
    public static final int CLAIMED = 0;
    /**
     * No room now: the store is full of committed values, views still held, or open claims, and may not (or cannot)
     * evict. Nothing was reserved; retry later, or fall back to the staged put, which reports {@code STORE_FULL}.
     */
    public static final int FULL = -1;
    /** {@link PutOptions#ifAbsent()} was set and the key already holds a live value. Nothing was reserved. */
    public static final int EXISTS = -2;

    private ClaimResult() {
    }

    /** A readable form, for logs and tests. */
    public static String describe(int code) {
        return switch (code) {
            case CLAIMED -> "claimed";
            case FULL -> "full";
            case EXISTS -> "exists";
            default -> "unknown claim result " + code;
        };
    }
}
