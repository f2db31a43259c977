package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.connector.HostLayerSource;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.ChecksummedCopy;
import dev.kvconnector.memory.WordSum;
import dev.kvconnector.mooncake.te.RemoteSegment;
import dev.kvconnector.mooncake.te.TransferBatch;
import dev.kvconnector.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * P's side of one peer-to-peer transfer: each {@link #putLayer} gathers the layer into registered staging with its
 * word sum, submits one batch of WRITEs into D's blocks followed by an {@code L} message, and returns; the batch
 * ends in the background and the next calls reap it. {@link #commit()} waits for every write, then sends {@code C}:
 * P's confirmation that nothing of the transfer is in flight. A stop from D ({@code X}) makes later puts write
 * nothing and the commit fail. Not thread-safe.
 */
final class P2pInsertSession implements InsertSession {
    private record InFlight(TransferBatch batch, MemorySegment staging, String what) {
    }

    private final TransferEngineConnector c;
    private final P2pDestination d;
    private final RemoteSegment peer;
    private final KVLayout layout;
    private final String self;
    private final int tokens;
    private final long tensorBytes;
    private final boolean[] put;
    private final ArrayDeque<InFlight> inFlight = new ArrayDeque<>();
    private final WordSum sum = new WordSum();
    private volatile String cancelled;
    private KVException failure;
    private boolean committed;
    private boolean aborted;

    P2pInsertSession(TransferEngineConnector c, P2pDestination d, RemoteSegment peer) {
        this.c = c;
        this.d = d;
        this.peer = peer;
        this.layout = c.layout;
        this.self = c.engine.segmentName();
        this.tokens = d.tokens();
        this.tensorBytes = tokens * layout.bytesPerTokenPerTensor();
        this.put = new boolean[layout.numLayers()];
    }

    @Override
    public int tokens() {
        return tokens;
    }

    /** D asked P to stop (the notification thread calls this). */
    void cancel(String from, String reason) {
        cancelled = from + " stopped waiting (" + reason + ")";
    }

    /** Whether D has told P to stop. */
    boolean isCancelled() {
        return cancelled != null;
    }

    @Override
    public void putLayer(int layer, LayerSource source) {
        checkWritable("putLayer");
        if (layer < 0 || layer >= put.length || put[layer]) {
            throw error(ErrorCode.INVALID_ARGUMENT, "layer " + layer + (layer >= 0 && layer < put.length
                    ? " was already put" : " outside 0.." + (put.length - 1)), "putLayer");
        }
        source.check(layout, tokens, "putLayer", c.endpoint);
        if (!(source instanceof HostLayerSource host)) {
            throw error(ErrorCode.UNSUPPORTED, "a peer-to-peer insert gathers host layers; "
                    + source.getClass().getSimpleName() + " is not one", "putLayer");
        }
        put[layer] = true;
        if (cancelled != null) {
            return;
        }
        long start = System.nanoTime();
        long bytes = layout.layerBytes(tokens);
        MemorySegment staging = lease(bytes);
        sum.reset();
        for (int t = 0; t < layout.tensorsPerLayer(); t++) {
            host.gather(layer, t, 0, tokens, staging, t * tensorBytes, sum);
        }
        TransferBatch batch = c.acquireBatch();
        for (int t = 0; t < layout.tensorsPerLayer(); t++) {
            addWrites(batch, staging, t * tensorBytes, d.cacheAddrs()[layer * layout.tensorsPerLayer() + t]);
        }
        submit(batch, staging, "layer " + layer, P2pMessage.layer(self, layer, bytes, sum.value()));
        c.metrics.insertLayer(System.nanoTime() - start, bytes);
        reap(false);
    }

    @Override
    public void putLayers(LayerSource source) {
        for (int l = 0; l < put.length; l++) {
            putLayer(l, source);
        }
    }

    /** One WRITE per run of consecutive blocks of D, from this tensor's part of the staging. */
    private void addWrites(TransferBatch batch, MemorySegment staging, long offset, long base) {
        int bs = layout.blockSize();
        long tb = layout.bytesPerTokenPerTensor();
        int[] ids = d.blockIds();
        for (int b = 0; b < ids.length; ) {
            int run = 1;
            while (b + run < ids.length && ids[b + run] == ids[b] + run) {
                run++;
            }
            long first = (long) b * bs;
            long n = Math.min((long) (b + run) * bs, tokens) - first;
            if (batch.write(staging.asSlice(offset + first * tb, n * tb), peer, base + (long) ids[b] * bs * tb,
                    n * tb) == TransferBatch.BATCH_FULL) {
                c.releaseBatch(batch);
                c.staging.release(staging);
                throw error(ErrorCode.INVALID_CONFIG, "a layer needs more WRITE requests than a batch holds ("
                        + batch.capacity() + ")", "putLayer");
            }
            b += run;
        }
    }

    private void submit(TransferBatch batch, MemorySegment staging, String what, String message) {
        int rc = batch.submit(d.transferId(), message);
        if (rc != 0) {
            KVException e = batch.submitFailure(rc);
            c.releaseBatch(batch);
            c.staging.release(staging);
            failure = failure == null ? e : failure;
            throw e;
        }
        inFlight.add(new InFlight(batch, staging, what));
    }

    @Override
    public void putHidden(Tensor hidden) {
        checkWritable("putHidden");
        hidden.requireHostAccessible("putHidden");
        long bytes = hidden.spec().byteSize();
        if (d.hiddenAddr() == 0) {
            throw error(ErrorCode.INVALID_ARGUMENT, "D's drop-select takes no hidden states", "putHidden");
        }
        if (bytes != d.hiddenBytes()) {
            throw error(ErrorCode.SHAPE_MISMATCH, "hidden states of " + bytes + " bytes; D expects "
                    + d.hiddenBytes(), "putHidden");
        }
        if (cancelled != null) {
            return;
        }
        MemorySegment staging = lease(bytes);
        sum.reset();
        ChecksummedCopy.copy(hidden.segment(), 0, staging, 0, bytes, sum);
        TransferBatch batch = c.acquireBatch();
        batch.write(staging, peer, d.hiddenAddr(), bytes);
        submit(batch, staging, "hidden states", P2pMessage.hidden(self, bytes, sum.value()));
    }

    private MemorySegment lease(long bytes) {
        MemorySegment s = c.staging.tryAcquire(bytes);
        if (s == null) {
            reap(true);
            s = c.staging.tryAcquire(bytes, c.transferTimeoutNanos);
        }
        if (s == null) {
            throw error(ErrorCode.STORE_FULL, c.staging.describeNoRoom(bytes), "putLayer");
        }
        return s;
    }

    /** Takes back batches that ended, oldest first; with {@code all}, waits for every one. */
    private void reap(boolean all) {
        while (!inFlight.isEmpty()) {
            InFlight f = inFlight.peek();
            int rc = all ? f.batch().await(c.transferTimeoutNanos, TimeUnit.NANOSECONDS) : f.batch().poll();
            if (rc == TransferBatch.IN_FLIGHT) {
                if (!all) {
                    return;
                }
                inFlight.poll();
                failure = failure == null ? error(ErrorCode.TIMEOUT, f.what() + " still in flight after "
                        + TimeUnit.NANOSECONDS.toMillis(c.transferTimeoutNanos) + " ms", "commit") : failure;
                try {
                    f.batch().close();
                } catch (KVException e) {
                    // the batch and its staging stay allocated: the engine may still read from them
                    c.errors.onError("p2p batch of transfer " + d.transferId() + " on " + c.endpoint, e);
                }
                continue;
            }
            inFlight.poll();
            if (rc != TransferBatch.COMPLETED && failure == null) {
                KVException why = f.batch().failure();
                failure = why != null ? why : error(ErrorCode.IO_ERROR, f.what() + " ended with code " + rc, "commit");
            }
            c.releaseBatch(f.batch());
            c.staging.release(f.staging());
        }
    }

    @Override
    public void commit() {
        checkWritable("commit");
        for (int l = 0; l < put.length; l++) {
            if (!put[l]) {
                abort("layer " + l + " was never put");
                throw error(ErrorCode.INVALID_ARGUMENT, "layer " + l + " was never put; the insert is aborted",
                        "commit");
            }
        }
        reap(true);
        if (cancelled != null || failure != null) {
            KVException why = failure != null ? failure : error(ErrorCode.TIMEOUT, cancelled + "; nothing more was "
                    + "written", "commit");
            abort();
            throw why;
        }
        int rc = c.engine.notify(peer, d.transferId(), P2pMessage.commit(self, put.length));
        if (rc != 0) {
            abort();
            throw error(ErrorCode.IO_ERROR, "the commit message to " + d.segment() + " failed with code " + rc,
                    "commit");
        }
        committed = true;
        c.outbound.remove(d.transferId(), this);
        c.metrics.commit();
    }

    /** Waits for writes in flight, then tells D the transfer is over. Idempotent; nothing after a commit. */
    @Override
    public void abort() {
        abort(null);
    }

    private void abort(String reason) {
        if (committed || aborted) {
            return;
        }
        aborted = true;
        reap(true);
        c.tell(d.segment(), d.transferId(), P2pMessage.abort(self, reason != null ? reason : cancelled != null
                ? cancelled : failure != null ? failure.code() + " " + failure.getMessage() : "the insert was aborted"));
        c.outbound.remove(d.transferId(), this);
        c.metrics.abort();
    }

    private void checkWritable(String op) {
        if (committed || aborted) {
            throw error(ErrorCode.CLOSED, "the insert of transfer " + d.transferId() + " is "
                    + (committed ? "committed" : "aborted"), op);
        }
    }

    private KVException error(ErrorCode code, String detail, String op) {
        return KVException.of(code, "transfer " + d.transferId() + " to " + d.segment() + ": " + detail)
                .store(c.endpoint).operation(op).key(d.transferId()).build();
    }

    @Override
    public void close() {
        abort();
    }
}
