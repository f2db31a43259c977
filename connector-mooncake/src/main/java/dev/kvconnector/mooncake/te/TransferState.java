package dev.kvconnector.mooncake.te;

/** The state of one transfer task, as {@code getTransferStatus} reports it ({@code STATUS_*} of the C ABI). */
public enum TransferState {
    /** 0: queued, not started. */
    WAITING,
    /** 1: bytes are moving. */
    PENDING,
    /** 2: the engine does not know the task. */
    INVALID,
    /** 3: cancelled. */
    CANCELED,
    /** 4: every byte arrived. */
    COMPLETED,
    /** 5: the engine gave up after its transfer timeout. */
    TIMEOUT,
    /** 6: refused (a range outside the peer's registrations) or the connection broke. */
    FAILED;

    private static final TransferState[] BY_CODE = values();

    /** The state for a native code, or null when the code is unknown to this version. */
    public static TransferState of(int code) {
        return code >= 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }

    /** The native code. */
    public int code() {
        return ordinal();
    }

    /** Whether the task has ended: nothing will change it any more and its buffers are free. */
    public boolean terminal() {
        return this != WAITING && this != PENDING;
    }
}
