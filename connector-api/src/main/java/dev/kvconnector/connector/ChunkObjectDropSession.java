package dev.kvconnector.connector;

import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.TensorPlacement;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.StoreKey;
import java.lang.foreign.MemorySegment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link DropSession} of a {@link StoreConnector} whose codec completes its objects {@link Completion#PER_CHUNK}:
 * each chunk's object is read once into pooled staging (one batch call), checked by the codec, and then every layer
 * is scattered from the objects into a host sink, layer by layer, so that {@link #awaitLayer} returns as each layer
 * lands. The longest present prefix is loaded: an absent, damaged or mismatched first chunk is a miss with its
 * reason, a later one ends the prefix before it (with a warning unless it is merely absent). Layer-wise, each chunk
 * object is polled for (backing off from 10 us to 1 ms) until the connector's layer timeout, since it appears only
 * once the producer's last layer is in.
 */
final class ChunkObjectDropSession extends StoreDropBase {
    private static final Logger LOG = LoggerFactory.getLogger(ChunkObjectDropSession.class);

    ChunkObjectDropSession(StoreConnector connector, ChunkGeometry geo, DropTarget target, DropMode mode,
                           boolean streaming, long timeoutNanos, int requestedTokens) {
        super(connector, geo, target, mode, streaming, timeoutNanos, requestedTokens);
    }

    @Override
    DropResult load() {
        int chunks = geo.chunks.length;
        if (chunks == 0) {
            return DropResult.miss(requestedTokens, MissReason.ABSENT, "the key scheme planned no chunks (a request "
                    + "shorter than one chunk, with partial chunks not kept)");
        }
        if (!(target.layers() instanceof HostLayerSink sink)) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "chunk objects of " + objects.keys().scheme() + " hold every "
                    + "layer and are scattered from host memory; this drop target's sink is not in host memory")
                    .store(store.uri()).operation("dropSelect")
                    .hint("drop-select into a host paged cache or host tensors, or use the kvc-v1 key scheme").build();
        }
        if (target.hidden() != null && objects.hiddenKey(0) == null) {
            return DropResult.miss(requestedTokens, MissReason.ABSENT, "key scheme " + objects.keys().scheme()
                    + " keeps no hidden states");
        }
        MemorySegment staging = DropStaging.acquire(connector, geo.layerStagingBytes);
        if (staging == null) {
            return DropStaging.full(connector, requestedTokens, geo.layerStagingBytes);
        }
        try {
            long start = System.nanoTime();
            Outcome read = readChunks(staging, chunks);
            if (read.miss != null) {
                return read.miss;
            }
            int loaded = read.chunks;
            long layerStart = start;
            for (int layer = 0; layer < connector.layout().numLayers(); layer++) {
                long bytes = scatterLayer(sink, staging, layer, loaded);
                connector.metricsRecorder().recordDropLayer(System.nanoTime() - layerStart, bytes);
                layerStart = System.nanoTime();
                progress.layerLoaded(layer);
            }
            if (target.hidden() != null) {
                DropResult miss = readHidden(loaded);
                if (miss != null) {
                    return miss;
                }
            }
            if (mode == DropMode.CONSUME) {
                consume(loaded);
            }
            return hit(geo.chunks[loaded - 1].endToken());
        } finally {
            connector.staging().release(staging);
        }
    }

    /** The chunks read and valid from the first, or the first chunk's miss. */
    private record Outcome(int chunks, DropResult miss) {
    }

    private Outcome readChunks(MemorySegment staging, int chunks) {
        StoreKey[] keys = scratch.keys;
        MemorySegment[] dsts = scratch.segments;
        long[] results = scratch.results;
        for (int c = 0; c < chunks; c++) {
            objects.layerKey(c, 0, keys[c]);
            dsts[c] = staging.asSlice(geo.layerOffsets[c], geo.layerObjectBytes[c]);
        }
        String[] corrupt = new String[chunks];
        try {
            store.getIntoBatch(keys, dsts, chunks, results);
        } catch (KVException e) {
            if (e.code() != ErrorCode.CORRUPT_OBJECT) {
                throw e;
            }
            readOneByOne(keys, dsts, results, corrupt, chunks);
        }
        for (int c = 0; c < chunks; c++) {
            long r = results[c];
            if (GetResult.isMiss(r) && streaming && corrupt[c] == null) {
                r = getWaiting(keys[c], dsts[c]);
            }
            DropResult miss = corrupt[c] != null ? DropResult.miss(requestedTokens, MissReason.CORRUPT, corrupt[c])
                    : check(c, keys[c], dsts[c], r);
            if (miss == null) {
                continue;
            }
            if (c == 0) {
                return new Outcome(0, miss);
            }
            if (miss.reason() != MissReason.ABSENT) {
                LOG.warn("chunk {} of tokens [{}, {}) not loaded, the prefix ends before it: {}", keys[c],
                        geo.chunks[c].startToken(), geo.chunks[c].endToken(), miss.detail());
            }
            return new Outcome(c, null);
        }
        return new Outcome(chunks, null);
    }

    /** After a batch that a store refused as corrupt: each key alone, so that the chunks before the bad one load. */
    private void readOneByOne(StoreKey[] keys, MemorySegment[] dsts, long[] results, String[] corrupt, int chunks) {
        for (int c = 0; c < chunks; c++) {
            try {
                results[c] = store.getInto(keys[c], dsts[c]);
            } catch (KVException e) {
                if (e.code() != ErrorCode.CORRUPT_OBJECT) {
                    throw e;
                }
                results[c] = GetResult.MISS;
                corrupt[c] = e.getMessage();
            }
        }
    }

    private DropResult check(int c, StoreKey key, MemorySegment dst, long r) {
        ChunkKeys ck = geo.chunks[c];
        String what = "chunk object " + key + " (tokens [" + ck.startToken() + ", " + ck.endToken() + "))";
        if (GetResult.isMiss(r)) {
            return streaming ? waitedMiss(what) : DropResult.miss(requestedTokens, MissReason.ABSENT, "no " + what);
        }
        if (GetResult.isTooSmall(r)) {
            return DropResult.miss(requestedTokens, MissReason.LAYOUT_MISMATCH, what + " holds "
                    + GetResult.requiredSize(r) + " bytes, the layout expects " + dst.byteSize()
                    + ". Another writer used this model name with a different layout");
        }
        int status = objects.validate(c, 0, dst, r);
        if (status == ObjectPlan.OK) {
            return null;
        }
        return DropResult.miss(requestedTokens, objects.isLayoutMismatch(status) ? MissReason.LAYOUT_MISMATCH
                : MissReason.CORRUPT, what + ": " + objects.describe(status));
    }

    /** Scatters layer {@code layer} of the first {@code chunks} objects; returns the bytes moved. */
    private long scatterLayer(HostLayerSink sink, MemorySegment staging, int layer, int chunks) {
        long bytes = 0;
        MemorySegment scratch = null;
        try {
            for (int c = 0; c < chunks; c++) {
                ChunkKeys ck = geo.chunks[c];
                for (int t = 0; t < geo.tensors; t++) {
                    TensorPlacement p = objects.placement(c, layer, t);
                    long base = geo.layerOffsets[c] + p.offset();
                    bytes += p.bytes();
                    if (p.isContiguous()) {
                        sink.scatter(layer, t, staging, base, ck.startToken(), ck.endToken());
                        continue;
                    }
                    if (scratch == null) {
                        scratch = connector.staging().acquire(maxTensorBytes(chunks));
                    }
                    StridedCopy.fromPlacement(staging, base, p, scratch);
                    sink.scatter(layer, t, scratch, 0, ck.startToken(), ck.endToken());
                }
            }
        } finally {
            if (scratch != null) {
                connector.staging().release(scratch);
            }
        }
        return bytes;
    }

    private long maxTensorBytes(int chunks) {
        long max = 0;
        for (int c = 0; c < chunks; c++) {
            max = Math.max(max, geo.chunks[c].tokens() * geo.tokenBytes);
        }
        return max;
    }

    @Override
    DropResult hiddenAbsent(int c) {
        return null;
    }

    private void consume(int chunks) {
        StoreKey[] keys = scratch.keys;
        int k = 0;
        for (int c = 0; c < chunks; c++) {
            objects.layerKey(c, 0, keys[k++]);
            if (objects.hiddenKey(c) != null) {
                objects.hiddenKey(c, keys[k++]);
            }
        }
        consume(keys, k, chunks);
    }
}
