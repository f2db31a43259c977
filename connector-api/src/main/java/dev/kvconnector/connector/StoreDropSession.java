package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.memory.WordSum;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The {@link DropSession} of a {@link StoreConnector}. Whole-request, it reads the manifests first and loads the
 * committed prefix; layer-wise, it polls for each layer's objects (backing off from 10 us to 1 ms) until the
 * connector's layer timeout, and checks the manifests last. Every object is validated by the codec before the
 * sink sees it; a bad or absent one is a miss with its reason.
 *
 * <p>Over 400 lines because its three read paths (staged, in place from a store view, straight into a sink's device
 * buffers) and the read sent ahead share the manifests, the miss reasons and the layer's destinations; apart, each
 * would repeat them. What it shares with the chunk-object drop-select is in {@link StoreDropBase}.
 */
final class StoreDropSession extends StoreDropBase {
    /** The layer index {@link #missOrTooSmall} takes for the hidden-state object. */
    private static final int HIDDEN = -1;

    /**
     * The store's view handle while the load runs when it reads in place ({@code VIEW}), else null; used by the load's
     * thread only.
     */
    private StoreView view;
    private final WordSum sum = new WordSum();
    /** Whether a view of this request was a copy rather than the store's memory: then views save nothing. */
    private boolean viewsAreCopies;
    /** Each layer's destinations and results, reused layer after layer by the load's one thread. */
    private MemorySegment[] layerDsts;
    /**
     * The next layer's batch read, sent before this layer is checked and scattered so that the store prepares it
     * meanwhile: whole-request loads from stores with {@code PIPELINED_READ}; else null.
     */
    private final StoreRead ahead;
    /**
     * The destinations and staging of the read {@link #ahead} has pending, for the layer after the one read last
     * (layers are read in order); {@code aheadStaging} is null when none is pending.
     */
    private MemorySegment[] aheadDsts;
    /** The keys of the read {@link #ahead} has pending. */
    private StoreKey[] aheadKeys;
    private MemorySegment aheadStaging;
    private long[] layerResults;
    private long[] manifestFlags;
    /** The sink's transfer while {@link #load()} runs, else null. */
    private SinkTransfer sink;
    /** The transfer of the last load, closed, which the sink may re-point for the next ({@link LayerSink#open}). */
    private SinkTransfer lastSink;

    StoreDropSession(StoreConnector connector, ChunkGeometry geo, DropTarget target, DropMode mode, boolean streaming,
                long timeoutNanos, int requestedTokens) {
        super(connector, geo, target, mode, streaming, timeoutNanos, requestedTokens);
        this.ahead = !streaming && connector.pipelinedReads() ? store.newRead() : null;
        room(geo.chunks.length);
    }

    /** {@inheritDoc} Keeps its arrays while they are large enough. */
    @Override
    void restart(ChunkGeometry geometry, DropTarget into, DropMode dropMode, long timeoutNanos, int tokens) {
        super.restart(geometry, into, dropMode, timeoutNanos, tokens);
        viewsAreCopies = false;
        committedChunks = 0;
        if (layerResults.length < geometry.chunks.length) {
            room(geometry.chunks.length);
        }
    }

    /** Per-chunk arrays for {@code chunks} chunks. */
    private void room(int chunks) {
        this.layerDsts = new MemorySegment[chunks];
        this.layerResults = new long[chunks];
        this.manifestFlags = new long[chunks];
        this.aheadDsts = ahead != null ? new MemorySegment[chunks] : null;
        this.aheadKeys = ahead != null ? RequestScratch.newKeys(chunks) : null;
    }

    @Override
    DropResult load() {
        view = connector.views() ? scratch.view(store) : null;
        try (SinkTransfer s = target.layers().open(connector.resources(), geo, "dropSelect", lastSink)) {
            sink = s;
            lastSink = s;
            return loadLayers();
        } finally {
            sink = null;
            view = null;
            abandonAhead();
        }
    }

    private DropResult loadLayers() {
        int chunks = geo.chunks.length;
        if (chunks == 0) {
            return DropResult.miss(requestedTokens, MissReason.ABSENT, "the key scheme planned no chunks");
        }
        if (!streaming) {
            DropResult bad = readManifests(chunks, false);
            if (bad != null) {
                return bad;
            }
            chunks = committedChunks;
            if (chunks == 0) {
                return DropResult.miss(requestedTokens, MissReason.ABSENT, "no committed entry for "
                        + geo.chunks[0].manifestKey());
            }
        }
        for (int layer = 0; layer < connector.layout().numLayers(); layer++) {
            DropResult miss = readLayer(layer, chunks);
            if (miss != null) {
                return miss;
            }
            progress.layerLoaded(layer);
        }
        if (streaming) {
            DropResult bad = readManifests(chunks, true);
            if (bad != null) {
                return bad;
            }
        }
        if (target.hidden() != null) {
            DropResult miss = readHidden(chunks);
            if (miss != null) {
                return miss;
            }
        }
        if (mode == DropMode.CONSUME) {
            consume(chunks);
        }
        return hit(geo.chunks[chunks - 1].endToken());
    }

    private int committedChunks;

    /**
     * Reads the manifests in one batch call and checks them in order; without waiting, stops at the first absent
     * one (the longest committed prefix); waiting, polls for each absent one until the deadline.
     */
    private DropResult readManifests(int chunks, boolean wait) {
        long slot = ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES);
        MemorySegment staging = DropStaging.acquire(connector, chunks * slot);
        if (staging == null) {
            return DropStaging.full(connector, requestedTokens, chunks * slot);
        }
        try {
            StoreKey[] keys = scratch.keys;
            MemorySegment[] dsts = scratch.manifestsIn(staging, chunks);
            long[] results = scratch.results;
            for (int c = 0; c < chunks; c++) {
                geo.chunks[c].manifestKey(keys[c]);
            }
            store.getIntoBatch(keys, dsts, chunks, results);
            int c = 0;
            for (; c < chunks; c++) {
                StoreKey key = keys[c];
                MemorySegment m = dsts[c];
                long r = results[c];
                if (GetResult.isMiss(r) && wait) {
                    r = getWaiting(key, m);
                }
                if (GetResult.isMiss(r)) {
                    if (wait) {
                        return waitedMiss("the producer's commit, manifest " + key + ",");
                    }
                    break;
                }
                if (GetResult.isTooSmall(r)) {
                    return DropResult.miss(requestedTokens, MissReason.CORRUPT, "manifest " + key + " is "
                            + GetResult.requiredSize(r) + " bytes, expected " + ChunkGeometry.MANIFEST_BYTES);
                }
                int status = RawTensorFormat.validate(m, r, ChunkGeometry.MANIFEST_SPEC,
                        connector.layout().fingerprint());
                if (status != RawTensorFormat.OK) {
                    return manifestMiss(status, key);
                }
                long base = RawTensorFormat.HEADER_BYTES;
                ChunkKeys ck = geo.chunks[c];
                if (m.get(ValueLayout.JAVA_LONG_UNALIGNED, base) != ck.startToken()
                        || m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 8) != ck.endToken()
                        || m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 16) != connector.layout().numLayers()) {
                    return DropResult.miss(requestedTokens, MissReason.LAYOUT_MISMATCH, "manifest " + key
                            + " describes another chunk or layer count");
                }
                manifestFlags[c] = m.get(ValueLayout.JAVA_LONG_UNALIGNED, base + 24);
            }
            committedChunks = c;
            return null;
        } finally {
            connector.staging().release(staging);
        }
    }

    private DropResult readLayer(int layer, int chunks) {
        if (sink.direct()) {
            return readLayerDirect(layer, chunks);
        }
        if (view != null && sink.takesObjects() && objects.fusedChecksum() && !viewsAreCopies) {
            return readLayerInPlace(layer, chunks);
        }
        long start = System.nanoTime();
        waitedNanos = 0;
        StoreKey[] keys = scratch.keys;
        geo.layerKeys(layer, keys, chunks);
        long[] results = layerResults;
        boolean sentAhead = aheadStaging != null;
        MemorySegment staging = sentAhead ? takeAhead(results)
                : DropStaging.acquire(connector, geo.layerStagingBytes);
        if (staging == null) {
            return DropStaging.full(connector, requestedTokens, geo.layerStagingBytes);
        }
        try {
            MemorySegment[] dsts = layerDsts;
            if (!sentAhead) {
                for (int c = 0; c < chunks; c++) {
                    dsts[c] = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
                }
                store.getIntoBatch(keys, dsts, chunks, results);
            }
            if (ahead != null && layer + 1 < connector.layout().numLayers()) {
                sendAhead(layer + 1, chunks);
            }
            long bytes = 0;
            // With a sink that takes objects the payload sum is fused into its scatter, as from a view: the headers
            // are checked here, each payload's sum after its scatter. Otherwise the codec checks whole objects first.
            boolean fused = sink.takesObjects() && objects.fusedChecksum();
            for (int c = 0; c < chunks; c++) {
                long r = results[c];
                if (GetResult.isMiss(r) && streaming) {
                    r = getWaiting(keys[c], dsts[c]);
                }
                DropResult miss = missOrTooSmall(r, keys[c], dsts[c].byteSize(), layer);
                if (miss == null) {
                    miss = statusMiss(fused ? objects.validateHeader(c, layer, dsts[c], r)
                            : objects.validate(c, layer, dsts[c], r), keys[c]);
                }
                if (miss != null) {
                    return miss;
                }
                bytes += r;
            }
            if (!fused) {
                sink.fromHost(layer, staging, chunks);
            } else {
                for (int c = 0; c < chunks; c++) {
                    sum.reset();
                    sink.fromObject(layer, c, dsts[c], sum);
                    DropResult miss = statusMiss(objects.verifyPayloadSum(c, layer, dsts[c], sum.value()), keys[c]);
                    if (miss != null) {
                        return miss;
                    }
                }
            }
            recordLayer(start, bytes);
            return null;
        } finally {
            connector.staging().release(staging);
        }
    }

    /**
     * Waits for the read sent ahead for this layer; its staging is the caller's to release and its destinations
     * become {@link #layerDsts}. A failed read gives its staging back and throws.
     */
    private MemorySegment takeAhead(long[] results) {
        MemorySegment staging = aheadStaging;
        aheadStaging = null;
        MemorySegment[] sent = aheadDsts;
        aheadDsts = layerDsts;
        layerDsts = sent;
        try {
            ahead.await(results);
        } catch (RuntimeException e) {
            connector.staging().release(staging);
            throw e;
        }
        return staging;
    }

    /** Sends layer {@code layer}'s batch read now, when the staging pool has room for a second layer at once. */
    private void sendAhead(int layer, int chunks) {
        MemorySegment staging = connector.staging().tryAcquire(geo.layerStagingBytes);
        if (staging == null) {
            return;
        }
        for (int c = 0; c < chunks; c++) {
            aheadDsts[c] = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
        }
        geo.layerKeys(layer, aheadKeys, chunks);
        try {
            store.sendGetIntoBatch(aheadKeys, aheadDsts, chunks, ahead);
        } catch (RuntimeException e) {
            connector.staging().release(staging);
            throw e;
        }
        aheadStaging = staging;
    }

    /**
     * Reads, and drops, a read sent ahead that the load ended before taking (a miss or a failure in the layer
     * before), into the layer results the ended load no longer reads, so that its connection and staging go back; a
     * failure of that read goes to the error handler.
     */
    private void abandonAhead() {
        if (aheadStaging == null) {
            return;
        }
        MemorySegment staging = aheadStaging;
        aheadStaging = null;
        try {
            ahead.await(layerResults);
        } catch (RuntimeException e) {
            connector.onIoError("a layer read ahead that the drop-select no longer needed, from", e);
        } finally {
            connector.staging().release(staging);
        }
    }

    /**
     * A layer from a store that reads in place ({@code VIEW}) into a sink that takes objects: each chunk's object is
     * checked by its header, scattered straight from the store's memory with the checksum fused into the scatter, then
     * its checksum compared. A mismatch is a {@code CORRUPT} miss (the sink's copy of that chunk counts as not loaded).
     */
    private DropResult readLayerInPlace(int layer, int chunks) {
        long start = System.nanoTime();
        waitedNanos = 0;
        StoreKey[] keys = scratch.keys;
        geo.layerKeys(layer, keys, chunks);
        long bytes = 0;
        for (int c = 0; c < chunks; c++) {
            long r = viewWaiting(keys[c], view);
            try {
                DropResult miss = missOrTooSmall(r, keys[c], geo.layerObjectBytes[c], layer);
                if (miss != null) {
                    return miss;
                }
                // A store over other stores views what a lower tier holds as a copy, one read per object: the
                // layers after this one are read by batch instead (one read per layer, as from the tier alone).
                viewsAreCopies |= !view.inPlace();
                MemorySegment object = view.segment();
                miss = statusMiss(objects.validateHeader(c, layer, object, r), keys[c]);
                if (miss != null) {
                    return miss;
                }
                sum.reset();
                sink.fromObject(layer, c, object, sum);
                miss = statusMiss(objects.verifyPayloadSum(c, layer, object, sum.value()), keys[c]);
                if (miss != null) {
                    return miss;
                }
                bytes += r;
            } finally {
                view.close();
            }
        }
        recordLayer(start, bytes);
        return null;
    }

    /**
     * A layer for a direct sink (a device cache with a {@code DEVICE_MEMORY} store): read straight into the sink's
     * own buffer (GPUDirect), headers copied back to check them (the payload checksum cannot be checked without the
     * payload on the host), then written into the sink.
     */
    private DropResult readLayerDirect(int layer, int chunks) {
        long start = System.nanoTime();
        waitedNanos = 0;
        MemorySegment deviceLayer = sink.acquireLayer();
        MemorySegment headers = null;
        try {
            StoreKey[] keys = scratch.keys;
            geo.layerKeys(layer, keys, chunks);
            MemorySegment[] dsts = layerDsts;
            long[] results = layerResults;
            for (int c = 0; c < chunks; c++) {
                dsts[c] = deviceLayer.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
            }
            store.getIntoBatch(keys, dsts, chunks, results);
            if (streaming) {
                for (int c = 0; c < chunks; c++) {
                    if (GetResult.isMiss(results[c])) {
                        results[c] = getWaiting(keys[c], dsts[c]);
                    }
                }
            }
            long headerBytes = objects.headerBytes();
            headers = connector.staging().acquire(chunks * headerBytes);
            sink.copyHeaders(deviceLayer, headers, chunks);
            long bytes = 0;
            for (int c = 0; c < chunks; c++) {
                MemorySegment header = headers.asSlice(c * headerBytes, headerBytes);
                DropResult miss = missOrTooSmall(results[c], keys[c], dsts[c].byteSize(), layer);
                if (miss == null) {
                    miss = statusMiss(objects.validateHeader(c, layer, header, results[c]), keys[c]);
                }
                if (miss != null) {
                    return miss;
                }
                bytes += results[c];
            }
            sink.fromDirect(layer, deviceLayer, chunks);
            recordLayer(start, bytes);
            return null;
        } finally {
            if (headers != null) {
                connector.staging().release(headers);
            }
            sink.release(deviceLayer);
        }
    }

    @Override
    DropResult hiddenAbsent(int c) {
        if ((manifestFlags[c] & ChunkGeometry.FLAG_HIDDEN) == 0) {
            return DropResult.miss(requestedTokens, MissReason.ABSENT, "the producer stored no hidden states for "
                    + geo.chunks[c].hiddenKey());
        }
        return null;
    }

    /** The layer's copy time without its wait for the producer, and (layer-wise) the wait apart. */
    private void recordLayer(long startNanos, long bytes) {
        connector.metricsRecorder().recordDropLayer(System.nanoTime() - startNanos - waitedNanos, bytes);
        if (streaming) {
            connector.metricsRecorder().recordDropWait(waitedNanos);
        }
    }

    /** The miss for a read result of {@code layer}'s object ({@link #HIDDEN} for the hidden states), or null. */
    private DropResult missOrTooSmall(long r, StoreKey key, long capacity, int layer) {
        if (!GetResult.isMiss(r) && !GetResult.isTooSmall(r)) {
            return null;
        }
        String what = layer == HIDDEN ? "hidden states" : "layer " + layer;
        if (GetResult.isMiss(r)) {
            return streaming ? waitedMiss(what + " object " + key) : DropResult.miss(requestedTokens,
                    MissReason.ABSENT, what + " object " + key + " is gone (evicted or removed) although its manifest "
                            + "exists");
        }
        if (GetResult.isTooSmall(r)) {
            return DropResult.miss(requestedTokens, MissReason.LAYOUT_MISMATCH, what + " object " + key + " is "
                    + GetResult.requiredSize(r) + " bytes, the layout expects " + capacity);
        }
        return null;
    }

    private DropResult manifestMiss(int status, StoreKey key) {
        return DropResult.miss(requestedTokens, RawTensorFormat.isLayoutMismatch(status) ? MissReason.LAYOUT_MISMATCH
                : MissReason.CORRUPT, "object " + key + ": " + RawTensorFormat.describe(status));
    }

    private void consume(int chunks) {
        int layers = connector.layout().numLayers();
        StoreKey[] keys = scratch.keys;
        int k = 0;
        for (int c = 0; c < chunks; c++) {
            geo.chunks[c].manifestKey(keys[k++]);
        }
        for (int c = 0; c < chunks; c++) {
            geo.chunks[c].hiddenKey(keys[k++]);
            for (int l = 0; l < layers; l++) {
                objects.layerKey(c, l, keys[k++]);
            }
        }
        consume(keys, k, chunks);
    }
}
