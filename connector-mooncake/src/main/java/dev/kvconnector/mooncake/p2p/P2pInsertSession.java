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
import java.util.concurrent.TimeUnit;

/**
 * P's side of one peer-to-peer transfer: each {@link #putLayer} gathers the layer into registered staging with its
 * word sum, submits one batch of WRITEs into D's blocks followed by an {@code L} message, and returns; the batch
 * ends in the background and the next calls reap it. At most the connector's {@code layersInFlight} batches are in
 * flight: a put waits for the oldest beyond that (with the default 2, the gather of a layer overlaps the transfer of
 * the one before it while the staging stays two warm buffers). {@link #commit()} waits for every write, then sends
 * {@code C}: P's confirmation that nothing of the transfer is in flight. A stop from D ({@code X}) makes later puts
 * write nothing and the commit fail. A put allocates nothing once warm (the {@code L} message is built in a reused
 * builder and encoded straight into the batch's native memory). A destination with a first layer
 * ({@link P2pDestination#fromLayer()}, when the prefill moved here from another P) takes the puts of the layers before
 * it and writes nothing of them. Not thread-safe.
 *
 * <p>The WRITEs of a layer are planned once per transfer: one per tensor and run of D's blocks that are consecutive
 * in token order, which are adjacent both in the staging and in D's memory. Runs of different tensors are never
 * merged, even where D's K ends right where its V begins: each tensor is its own registration at D, and a WRITE
 * must stay inside one (an RDMA memory region; the TCP transport's range check).
 */
final class P2pInsertSession implements InsertSession {
    private static final int HIDDEN = -1;

    private final TransferEngineConnector c;
    private final P2pDestination d;
    private final RemoteSegment peer;
    private final KVLayout layout;
    private final String self;
    private final int tokens;
    private final long tensorBytes;
    private final boolean[] put;
    /** D's blocks as runs: one WRITE per run and tensor. */
    private final BlockRuns runs;
    /**
     * A ring of {@code layersInFlight} slots, the oldest batch in flight at {@code flightHead}: each slot keeps its
     * batch for the whole transfer (reset between layers, back to the connector at the end) and holds, while in
     * flight, the staging and what it carries (a layer, or {@link #HIDDEN}).
     */
    private final int slots;
    private final TransferBatch[] batches;
    private final MemorySegment[] flightStaging;
    private final int[] flightWhat;
    private int flightHead;
    private int flightSize;
    private final WordSum sum = new WordSum();
    private final StringBuilder message = new StringBuilder(128);
    private volatile String cancelled;
    private KVException failure;
    private boolean committed;
    private boolean aborted;

    /**
     * Plans the transfer's WRITEs.
     *
     * @throws KVException {@code INVALID_CONFIG} when a layer needs more WRITE requests than a batch holds
     */
    P2pInsertSession(TransferEngineConnector c, P2pDestination d, RemoteSegment peer) {
        this.c = c;
        this.d = d;
        this.peer = peer;
        this.layout = c.layout;
        this.self = c.engine.segmentName();
        this.tokens = d.tokens();
        this.tensorBytes = tokens * layout.bytesPerTokenPerTensor();
        this.put = new boolean[layout.numLayers()];
        this.slots = c.layersInFlight;
        this.batches = new TransferBatch[slots];
        this.flightStaging = new MemorySegment[slots];
        this.flightWhat = new int[slots];
        this.runs = new BlockRuns(d.blockIds(), layout.blockSize(), tokens);
        int writes = runs.count() * layout.tensorsPerLayer();
        if (writes > c.batchCapacity) {
            throw error(ErrorCode.INVALID_CONFIG, "a layer needs " + writes + " WRITE requests (" + runs.count()
                    + " runs of D's blocks x " + layout.tensorsPerLayer() + " tensors), more than a batch holds ("
                    + c.batchCapacity + "); raise maxBlocksPerRequest", "beginInsert");
        }
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
        if (cancelled != null || layer < d.fromLayer()) {
            // Below fromLayer D accepted the layer from a P the prefill moved away from, and may be reading it.
            return;
        }
        long start = System.nanoTime();
        long bytes = layout.layerBytes(tokens);
        MemorySegment staging = lease(bytes);
        sum.reset();
        try {
            for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                host.gather(layer, t, 0, tokens, staging, t * tensorBytes, sum);
            }
        } catch (RuntimeException e) {
            c.staging.release(staging);
            throw e;
        }
        TransferBatch batch = nextBatch();
        addWrites(batch, staging, layer);
        submit(batch, staging, layer, P2pMessage.layer(message, d.generation(), self, layer, bytes, sum.value()));
        c.metrics.insertLayer(System.nanoTime() - start, bytes, runs.count() * layout.tensorsPerLayer());
        reap(slots);
    }

    @Override
    public void putLayers(LayerSource source) {
        for (int l = 0; l < put.length; l++) {
            putLayer(l, source);
        }
    }

    /** Adds a WRITE per tensor and run of D's blocks, from the layer gathered in {@code staging}. */
    private void addWrites(TransferBatch batch, MemorySegment staging, int layer) {
        long tb = layout.bytesPerTokenPerTensor();
        for (int t = 0; t < layout.tensorsPerLayer(); t++) {
            long base = d.cacheAddrs()[layer * layout.tensorsPerLayer() + t];
            for (int r = 0; r < runs.count(); r++) {
                batch.write(staging, t * tensorBytes + runs.firstToken(r) * tb, peer, base + runs.firstSlot(r) * tb,
                        runs.tokens(r) * tb);
            }
        }
    }

    /** The batch of the next free slot ({@link #lease} made one free), empty. */
    private TransferBatch nextBatch() {
        int at = (flightHead + flightSize) % slots;
        if (batches[at] == null) {
            batches[at] = c.acquireBatch();
        }
        return batches[at];
    }

    private void submit(TransferBatch batch, MemorySegment staging, int what, CharSequence text) {
        int rc = batch.submit(d.transferId(), text);
        if (rc != 0) {
            KVException e = batch.submitFailure(rc);
            batch.reset();
            c.staging.release(staging);
            failure = failure == null ? e : failure;
            throw e;
        }
        int at = (flightHead + flightSize) % slots;
        flightStaging[at] = staging;
        flightWhat[at] = what;
        flightSize++;
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
        TransferBatch batch = nextBatch();
        batch.write(staging, peer, d.hiddenAddr(), bytes);
        submit(batch, staging, HIDDEN, P2pMessage.hidden(d.generation(), self, bytes, sum.value()));
    }

    /** Staging for the next batch, once fewer than {@code layersInFlight} are in flight. */
    private MemorySegment lease(long bytes) {
        reap(slots - 1);
        MemorySegment s = c.staging.tryAcquire(bytes);
        if (s == null) {
            reap(0);
            s = c.staging.tryAcquire(bytes, c.transferTimeoutNanos);
        }
        if (s == null) {
            throw error(ErrorCode.STORE_FULL, c.staging.describeNoRoom(bytes), "putLayer");
        }
        return s;
    }

    /** Takes back batches that ended, oldest first, waiting for the oldest while more than {@code keep} remain. */
    private void reap(int keep) {
        while (flightSize > 0) {
            boolean wait = flightSize > keep;
            int at = flightHead;
            TransferBatch batch = batches[at];
            int rc = wait ? batch.await(c.transferTimeoutNanos, TimeUnit.NANOSECONDS) : batch.poll();
            if (rc == TransferBatch.IN_FLIGHT && !wait) {
                return;
            }
            MemorySegment staging = flightStaging[at];
            flightStaging[at] = null;
            flightHead = (flightHead + 1) % slots;
            flightSize--;
            if (rc == TransferBatch.IN_FLIGHT) {
                failure = failure == null ? error(ErrorCode.TIMEOUT, describe(flightWhat[at]) + " still in flight "
                        + "after " + TimeUnit.NANOSECONDS.toMillis(c.transferTimeoutNanos) + " ms", "commit") : failure;
                batches[at] = null;
                try {
                    batch.close();
                } catch (KVException e) {
                    // the batch and its staging stay allocated: the engine may still read from them
                    c.errors.onError("p2p batch of transfer " + d.transferId() + " on " + c.endpoint, e);
                }
                continue;
            }
            if (rc != TransferBatch.COMPLETED && failure == null) {
                KVException why = batch.failure();
                failure = why != null ? why : error(ErrorCode.IO_ERROR, describe(flightWhat[at]) + " ended with code "
                        + rc, "commit");
            }
            c.staging.release(staging);
            if (!c.reset(batch)) {
                batches[at] = null;
            }
        }
    }

    /** Waits for every batch in flight, then gives the slots' batches back to the connector. */
    private void endFlight() {
        reap(0);
        for (int i = 0; i < slots; i++) {
            if (batches[i] != null) {
                c.releaseBatch(batches[i]);
                batches[i] = null;
            }
        }
    }

    private static String describe(int what) {
        return what == HIDDEN ? "hidden states" : "layer " + what;
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
        endFlight();
        if (cancelled != null || failure != null) {
            KVException why = failure != null ? failure : error(ErrorCode.TIMEOUT, cancelled + "; nothing more was "
                    + "written", "commit");
            abort();
            throw why;
        }
        int rc = c.engine.notify(peer, d.transferId(), P2pMessage.commit(d.generation(), self, put.length));
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
        endFlight();
        c.tell(d.segment(), d.transferId(), P2pMessage.abort(d.generation(), self, reason != null ? reason
                : cancelled != null ? cancelled : failure != null ? failure.code() + " " + failure.getMessage()
                : "the insert was aborted"));
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
