package dev.kvconnector.mooncake.te;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * Every return code of the transfer engine's C ABI as a named {@link KVException} with a hint. The int functions
 * return negative codes ({@value #ERR_GENERIC}, {@value #ERR_ADDRESS_OVERLAPPED}); {@code submitTransfer*},
 * {@code getTransferStatus} and {@code freeBatchID} return positive ones ({@value #INVALID_ARGUMENT},
 * {@value #TOO_MANY_REQUESTS}, {@value #BUSY}); a task's end is a {@link TransferState}.
 */
public final class TransferEngineErrors {
    /** -1: the generic failure of an int function (openSegment on an unreachable peer, a bad argument). */
    public static final int ERR_GENERIC = -1;
    /** -7: a registration overlaps one that exists. */
    public static final int ERR_ADDRESS_OVERLAPPED = -7;
    /** 1: an argument was rejected (an unknown segment id, a bad opcode, a NULL source). */
    public static final int INVALID_ARGUMENT = 1;
    /** 2: the requests exceed what the batch was allocated for. */
    public static final int TOO_MANY_REQUESTS = 2;
    /** 4: busy: a batch whose tasks have not all been polled to a terminal state cannot be freed. */
    public static final int BUSY = 4;

    private TransferEngineErrors() {
    }

    /** {@code openSegment} of {@code name} ({@code host:port} in P2PHANDSHAKE mode) returned {@code rc}. */
    public static KVException openSegmentFailed(String uri, String name, int rc) {
        return KVException.of(ErrorCode.STORE_UNREACHABLE, "cannot open the peer segment " + name
                        + " (openSegment returned " + rc + ")")
                .store(uri).operation("openSegment").nativeCode(rc)
                .hint("is a transfer engine running at " + name + " (the peer's segmentName(), its "
                        + "getLocalIpAndPort in P2PHANDSHAKE mode), is that host:port reachable from here (firewall, "
                        + "container network), and is the same metadata (metadata=) used on both sides?")
                .build();
    }

    /** {@code registerLocalMemory} of {@code bytes} at {@code address} returned {@code rc}. */
    public static KVException registerFailed(String uri, long address, long bytes, String location, int rc) {
        String range = range(address, bytes);
        if (rc == ERR_ADDRESS_OVERLAPPED) {
            return KVException.of(ErrorCode.INVALID_ARGUMENT, "registering " + range + " at " + location
                            + " failed: it overlaps a registered buffer (code -7)")
                    .store(uri).operation("registerLocalMemory").nativeCode(rc)
                    .hint("register each buffer once; unregister the old range before registering a changed one")
                    .build();
        }
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "registering " + range + " at " + location
                        + " failed (code " + rc + ")")
                .store(uri).operation("registerLocalMemory").nativeCode(rc)
                .hint("is the location cpu:N, cuda:N or *, the memory non-empty, and (for cuda:N) the library built "
                        + "with CUDA support and the pointer device memory? The engine's log (stderr) names the cause")
                .build();
    }

    /** {@code unregisterLocalMemory} of the buffer at {@code address} returned {@code rc}. */
    public static KVException unregisterFailed(String uri, long address, int rc) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "unregistering the buffer at 0x" + Long.toHexString(address)
                        + " failed (code " + rc + ")")
                .store(uri).operation("unregisterLocalMemory").nativeCode(rc)
                .hint("pass the start address of a registered buffer, once").build();
    }

    /** {@code submitTransfer*} of {@code count} requests into a batch of {@code capacity} returned {@code rc}. */
    public static KVException submitFailed(String uri, int rc, int count, int capacity) {
        return switch (rc) {
            case TOO_MANY_REQUESTS -> KVException.of(ErrorCode.INVALID_ARGUMENT, "submitting " + count
                            + " requests failed: too many requests for a batch of " + capacity + " (code 2)")
                    .store(uri).operation("submitTransfer").nativeCode(rc)
                    .hint("allocate the batch with room for every request (newBatch(capacity)), or use two batches")
                    .build();
            case BUSY -> KVException.of(ErrorCode.BUSY, "submitting " + count + " requests failed: the engine is busy "
                            + "(code 4)")
                    .store(uri).operation("submitTransfer").nativeCode(rc).hint("retry after polling").build();
            case INVALID_ARGUMENT -> KVException.of(ErrorCode.INVALID_ARGUMENT, "submitting " + count
                            + " requests failed: an argument was rejected (code 1)")
                    .store(uri).operation("submitTransfer").nativeCode(rc)
                    .hint("is each request's segment still open (openSegment) and not LOCAL_SEGMENT, its source "
                            + "non-NULL, and the batch not freed?")
                    .build();
            default -> KVException.of(ErrorCode.STORE_ERROR, "submitting " + count + " requests failed (code " + rc
                            + ")")
                    .store(uri).operation("submitTransfer").nativeCode(rc)
                    .hint("the engine's log (stderr) names the cause").build();
        };
    }

    /** {@code getTransferStatus} of task {@code task} returned {@code rc} instead of 0. */
    public static KVException statusFailed(String uri, int task, int rc) {
        return KVException.of(ErrorCode.INTERNAL, "getTransferStatus of task " + task + " failed (code " + rc + ")")
                .store(uri).operation("getTransferStatus").nativeCode(rc)
                .hint("was the batch freed, or the task never submitted? Use one batch from one thread").build();
    }

    /**
     * A task that ended in {@code state} (not {@link TransferState#COMPLETED}): a WRITE ({@code write}) or READ of
     * {@code bytes} bytes between {@code localAddress} here and {@code remoteAddress} on {@code segment}.
     */
    public static KVException transferFailed(String uri, TransferState state, boolean write, String segment,
                                             long localAddress, long remoteAddress, long bytes) {
        String what = (write ? "WRITE of " + range(localAddress, bytes) + " to " : "READ into "
                + range(localAddress, bytes) + " from ") + range(remoteAddress, bytes) + " on " + segment;
        if (state == TransferState.TIMEOUT) {
            return KVException.of(ErrorCode.TIMEOUT, what + " timed out")
                    .store(uri).operation("transfer").nativeCode(state.code())
                    .hint("is the peer alive and the network path up? The real engine's transfer timeout is "
                            + "MC_TRANSFER_TIMEOUT (seconds)")
                    .build();
        }
        return KVException.of(ErrorCode.IO_ERROR, what + " ended " + state)
                .store(uri).operation("transfer").nativeCode(state.code())
                .hint("is " + range(remoteAddress, bytes) + " inside a buffer that " + segment + " registered "
                        + "(its address, passed out of band, plus an offset within its length)? Did the peer die or "
                        + "close its engine?")
                .build();
    }

    /** {@code freeBatchID} returned {@code rc}. */
    public static KVException freeBatchFailed(String uri, int rc) {
        return KVException.of(rc == BUSY ? ErrorCode.BUSY : ErrorCode.INTERNAL, "freeBatchID failed (code " + rc
                        + (rc == BUSY ? ": busy, a task is still in flight)" : ")"))
                .store(uri).operation("freeBatchID").nativeCode(rc)
                .hint("poll every task of the batch to a terminal state before freeing it").build();
    }

    /** A short-named int function returned a negative {@code rc}. */
    public static KVException callFailed(String uri, String function, int rc, String hint) {
        return KVException.of(ErrorCode.STORE_ERROR, function + " failed (code " + rc + ")")
                .store(uri).operation(function).nativeCode(rc).hint(hint).build();
    }

    static String range(long address, long bytes) {
        return bytes + " bytes at 0x" + Long.toHexString(address);
    }
}
