package dev.kvconnector.mooncake.te;

import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_LENGTH;
import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_OPCODE;
import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_RESERVED;
import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_SOURCE;
import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_TARGET_ID;
import static dev.kvconnector.mooncake.te.TransferEngineLibrary.REQ_TARGET_OFFSET;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A batch of WRITE and READ requests between this engine's memory and peers' segments: add requests, {@link
 * #submit()} them (with or without a notification), then {@link #poll()} until the batch ends. The hot path returns
 * codes: {@link #write}, {@link #read}, {@link #submit()} and {@link #poll()} never throw for a transfer that
 * fails; {@link #failure()} describes a failure afterwards.
 *
 * <pre>{@code
 * TransferBatch batch = engine.newBatch(layers);      // once
 * batch.write(layer, peer, peerAddress, layer.byteSize());
 * batch.submit("req-42", "layer 0");                  // the peer sees the notification after the bytes
 * int rc;
 * while ((rc = batch.poll()) == TransferBatch.IN_FLIGHT) { Thread.onSpinWait(); }
 * if (rc != TransferBatch.COMPLETED) { throw batch.failure(); }
 * batch.reset();                                      // reuse for the next request
 * }</pre>
 *
 * <p>Source and destination memory must stay valid until the batch has ended; registering it with the engine is
 * needed for RDMA and checked by the peer for the remote side. Use one batch from one thread at a time; several
 * batches may run at once on different threads. The native memory for the requests is allocated once, when the
 * batch is made, and freed by {@link #close()}.
 */
public final class TransferBatch implements AutoCloseable {
    /** {@link #poll()}: a task is still waiting or moving bytes. */
    public static final int IN_FLIGHT = 0;
    /** {@link #poll()}: every submitted task completed. */
    public static final int COMPLETED = 1;
    /** {@link #poll()}: every task ended and at least one FAILED (or was cancelled or invalid). */
    public static final int FAILED = -1;
    /** {@link #poll()}: every task ended and at least one timed out (and none failed before it). */
    public static final int TIMED_OUT = -2;
    /** {@link #poll()}: nothing was submitted. */
    public static final int NOTHING_SUBMITTED = -3;
    /** {@link #poll()}: {@code getTransferStatus} itself returned an error. */
    public static final int STATUS_ERROR = -4;
    /** {@link #write} and {@link #read}: the batch has no room for another request. */
    public static final int BATCH_FULL = -5;

    /** How long {@link #close()} waits for submitted tasks to end before giving up on the native batch, in ms. */
    static final long CLOSE_WAIT_MS = 10_000;

    private final TransferEngine engine;
    private final TransferEngineLibrary library;
    private final int capacity;
    private final Arena arena;
    private final MemorySegment requests;
    private final MemorySegment status;
    private final MemorySegment notifyScratch;
    private final MemorySegment notifyHeader;
    private final MemorySegment[] locals;
    private final long[] localOffsets;
    private final RemoteSegment[] peers;
    private long batchId;
    private int added;
    private int submitted;
    private int nextToPoll;
    private int failedTask = -1;
    private TransferState failedState;
    private int statusRc;
    private boolean closed;

    TransferBatch(TransferEngine engine, int capacity) {
        this.engine = engine;
        this.library = engine.library();
        this.capacity = capacity;
        this.arena = Arena.ofShared();
        try {
            this.requests = arena.allocate(TransferEngineLibrary.TRANSFER_REQUEST, capacity);
            this.status = arena.allocate(TransferEngineLibrary.TRANSFER_STATUS);
            this.notifyScratch = NotifyText.allocate(arena);
            this.notifyHeader = NotifyText.header(notifyScratch);
            this.locals = new MemorySegment[capacity];
            this.localOffsets = new long[capacity];
            this.peers = new RemoteSegment[capacity];
            this.batchId = allocate();
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    private long allocate() {
        long id = library.allocateBatchId(engine.handle(), capacity);
        if (id == TransferEngineLibrary.INVALID_BATCH) {
            throw KVException.of(ErrorCode.STORE_ERROR, "allocateBatchID(" + capacity + ") failed")
                    .store(engine.uri()).operation("allocateBatchID")
                    .hint("is the batch size within the engine's limit, and is there memory left?").build();
        }
        return id;
    }

    /** The most requests this batch takes between resets. */
    public int capacity() {
        return capacity;
    }

    /**
     * Adds a WRITE of {@code bytes} from the start of {@code source} to {@code remoteAddress} in {@code peer}'s
     * memory (an address the peer registered, passed out of band).
     *
     * @return the request's index in the batch, or {@link #BATCH_FULL}
     * @throws IndexOutOfBoundsException when {@code bytes} exceeds {@code source}
     */
    public int write(MemorySegment source, RemoteSegment peer, long remoteAddress, long bytes) {
        return add(TransferEngineLibrary.OPCODE_WRITE, source, 0, peer, remoteAddress, bytes);
    }

    /**
     * Adds a WRITE of {@code bytes} from {@code source} at byte offset {@code offset} to {@code remoteAddress} in
     * {@code peer}'s memory: {@link #write(MemorySegment, RemoteSegment, long, long)} of a part of a buffer,
     * without a slice object per request.
     *
     * @return the request's index in the batch, or {@link #BATCH_FULL}
     * @throws IndexOutOfBoundsException when {@code [offset, offset + bytes)} exceeds {@code source}
     */
    public int write(MemorySegment source, long offset, RemoteSegment peer, long remoteAddress, long bytes) {
        return add(TransferEngineLibrary.OPCODE_WRITE, source, offset, peer, remoteAddress, bytes);
    }

    /**
     * Adds a READ of {@code bytes} from {@code remoteAddress} in {@code peer}'s memory into the start of
     * {@code destination}.
     *
     * @return the request's index in the batch, or {@link #BATCH_FULL}
     */
    public int read(MemorySegment destination, RemoteSegment peer, long remoteAddress, long bytes) {
        return add(TransferEngineLibrary.OPCODE_READ, destination, 0, peer, remoteAddress, bytes);
    }

    private int add(int opcode, MemorySegment local, long offset, RemoteSegment peer, long remoteAddress,
                    long bytes) {
        checkOpen();
        Objects.checkFromIndexSize(offset, bytes, local.byteSize());
        TransferEngine.requireNative(local);
        if (added == capacity) {
            return BATCH_FULL;
        }
        long at = added * TransferEngineLibrary.TRANSFER_REQUEST.byteSize();
        requests.set(JAVA_INT, at + REQ_OPCODE, opcode);
        requests.set(JAVA_INT, at + REQ_OPCODE + 4, 0);
        // source is a pointer: 64 bits on every platform the engine runs on
        requests.set(JAVA_LONG, at + REQ_SOURCE, local.address() + offset);
        requests.set(JAVA_INT, at + REQ_TARGET_ID, peer.id());
        requests.set(JAVA_INT, at + REQ_RESERVED, 0);
        requests.set(JAVA_LONG, at + REQ_TARGET_OFFSET, remoteAddress);
        requests.set(JAVA_LONG, at + REQ_LENGTH, bytes);
        locals[added] = local;
        localOffsets[added] = offset;
        peers[added] = peer;
        return added++;
    }

    /**
     * Submits the requests added since the last submit.
     *
     * @return 0, or the engine's positive code ({@link TransferEngineErrors#INVALID_ARGUMENT},
     *     {@link TransferEngineErrors#TOO_MANY_REQUESTS}); {@link #submitFailure(int)} describes it
     */
    public int submit() {
        checkOpen();
        int count = added - submitted;
        int rc = library.submitTransfer(engine.handle(), batchId, pending(), count);
        if (rc == 0) {
            submitted = added;
        }
        return rc;
    }

    /**
     * Submits the requests added since the last submit, then a notification that reaches the peer of the last
     * request after their bytes ({@code submitTransferWithNotify}).
     *
     * Name and message may be any {@link CharSequence} (a {@link StringBuilder} reused per layer, say): they are
     * encoded straight into the batch's native memory, and the call allocates nothing.
     *
     * @return as {@link #submit()}
     * @throws KVException {@code INVALID_ARGUMENT} when name and message exceed 4094 bytes of UTF-8
     */
    public int submit(CharSequence notifyName, CharSequence notifyMessage) {
        checkOpen();
        int count = added - submitted;
        NotifyText.write(notifyScratch, notifyName, notifyMessage);
        int rc = library.submitTransferWithNotify(engine.handle(), batchId, pending(), count, notifyHeader);
        if (rc == 0) {
            submitted = added;
        }
        return rc;
    }

    /** The requests added since the last submit: the whole array (no slice object) when none was submitted. */
    private MemorySegment pending() {
        long stride = TransferEngineLibrary.TRANSFER_REQUEST.byteSize();
        return submitted == 0 ? requests
                : requests.asSlice(submitted * stride, Math.max(1, added - submitted) * stride);
    }

    /** A description of a code that {@link #submit()} returned. */
    public KVException submitFailure(int rc) {
        return TransferEngineErrors.submitFailed(engine.uri(), rc, added - submitted, capacity);
    }

    /**
     * Polls the submitted tasks, in order; a task that has ended is not polled again.
     *
     * @return {@link #IN_FLIGHT}, {@link #COMPLETED}, {@link #FAILED}, {@link #TIMED_OUT},
     *     {@link #NOTHING_SUBMITTED} or {@link #STATUS_ERROR}
     */
    public int poll() {
        if (submitted == 0) {
            return NOTHING_SUBMITTED;
        }
        while (nextToPoll < submitted) {
            int rc = library.getTransferStatus(engine.handle(), batchId, nextToPoll, status);
            if (rc != 0) {
                statusRc = rc;
                return STATUS_ERROR;
            }
            TransferState state = TransferState.of(status.get(JAVA_INT, TransferEngineLibrary.STATUS_STATE));
            if (state == null || !state.terminal()) {
                return IN_FLIGHT;
            }
            if (state != TransferState.COMPLETED && failedTask < 0) {
                failedTask = nextToPoll;
                failedState = state;
            }
            nextToPoll++;
        }
        if (statusRc != 0) {
            return STATUS_ERROR;
        }
        if (failedTask < 0) {
            return COMPLETED;
        }
        return failedState == TransferState.TIMEOUT ? TIMED_OUT : FAILED;
    }

    /**
     * Polls until the batch ends or {@code timeout} passes, parking briefly between polls.
     *
     * @return what {@link #poll()} returned last ({@link #IN_FLIGHT} when the time ran out)
     */
    public int await(long timeout, TimeUnit unit) {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        int rc;
        while ((rc = poll()) == IN_FLIGHT && System.nanoTime() - deadline < 0) {
            LockSupport.parkNanos(20_000);
        }
        return rc;
    }

    /** Why the batch did not complete (the first task that failed), or null when it did not fail. */
    public KVException failure() {
        if (statusRc != 0) {
            return TransferEngineErrors.statusFailed(engine.uri(), nextToPoll, statusRc);
        }
        if (failedTask < 0) {
            return null;
        }
        long at = failedTask * TransferEngineLibrary.TRANSFER_REQUEST.byteSize();
        return TransferEngineErrors.transferFailed(engine.uri(), failedState,
                requests.get(JAVA_INT, at + REQ_OPCODE) == TransferEngineLibrary.OPCODE_WRITE,
                peers[failedTask].name(), locals[failedTask].address() + localOffsets[failedTask],
                requests.get(JAVA_LONG, at + REQ_TARGET_OFFSET), requests.get(JAVA_LONG, at + REQ_LENGTH));
    }

    /**
     * Makes the batch empty for reuse: frees the native batch and allocates a new one.
     *
     * @throws KVException {@code BUSY} when a submitted task has not ended ({@link #poll()} first)
     */
    public void reset() {
        checkOpen();
        if (submitted > 0) {
            int rc = library.freeBatchId(engine.handle(), batchId);
            if (rc != 0) {
                throw TransferEngineErrors.freeBatchFailed(engine.uri(), rc);
            }
            batchId = TransferEngineLibrary.INVALID_BATCH;
            batchId = allocate();
        }
        Arrays.fill(locals, null);
        Arrays.fill(peers, null);
        added = 0;
        submitted = 0;
        nextToPoll = 0;
        failedTask = -1;
        failedState = null;
        statusRc = 0;
    }

    private void checkOpen() {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the transfer batch is closed").store(engine.uri()).build();
        }
    }

    /**
     * Waits (up to 10 s) for submitted tasks to end, frees the native batch and the batch's memory. Idempotent.
     *
     * @throws KVException {@code BUSY} when a task did not end in time: the native batch is then left allocated
     *     (freeing it while the engine uses it would crash the process)
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        engine.forget(this);
        try {
            if (submitted > 0 && await(CLOSE_WAIT_MS, TimeUnit.MILLISECONDS) == IN_FLIGHT) {
                throw TransferEngineErrors.freeBatchFailed(engine.uri(), TransferEngineErrors.BUSY);
            }
            int rc = library.freeBatchId(engine.handle(), batchId);
            if (rc != 0) {
                throw TransferEngineErrors.freeBatchFailed(engine.uri(), rc);
            }
        } finally {
            arena.close();
        }
    }
}
