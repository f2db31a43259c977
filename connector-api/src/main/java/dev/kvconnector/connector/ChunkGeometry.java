package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;

/**
 * Sizes and offsets of one request's objects, computed once per request: per chunk, the layer object's spec
 * {@code [tensors, chunkTokens, kvHeads, headSize]} and its place in a staging segment that holds every chunk
 * of one layer back to back.
 */
final class ChunkGeometry {
    /** Manifest payload: int64 start token, end token, layer count, flags. */
    static final TensorSpec MANIFEST_SPEC = TensorSpec.of(DType.INT64, 4);
    static final long MANIFEST_BYTES = RawTensorFormat.encodedSize(MANIFEST_SPEC);
    static final long FLAG_HIDDEN = 1;

    final KeyPlan plan;
    final ChunkKeys[] chunks;
    final TensorSpec[] layerSpecs;
    final long[] layerOffsets;
    final long layerStagingBytes;
    final long tokenBytes;
    final int tensors;

    ChunkGeometry(KeyPlan plan, KVLayout layout) {
        this.plan = plan;
        this.chunks = plan.chunks().toArray(new ChunkKeys[0]);
        this.tokenBytes = layout.bytesPerTokenPerTensor();
        this.tensors = layout.tensorsPerLayer();
        this.layerSpecs = new TensorSpec[chunks.length];
        this.layerOffsets = new long[chunks.length];
        long off = 0;
        for (int c = 0; c < chunks.length; c++) {
            layerSpecs[c] = TensorSpec.of(layout.dtype(), tensors, chunks[c].tokens(), layout.kvHeads(), layout.headSize());
            layerOffsets[c] = off;
            off += align(RawTensorFormat.encodedSize(layerSpecs[c]));
        }
        this.layerStagingBytes = off;
    }

    /** Objects start on 64-byte boundaries in staging, so copies stay cache-line aligned. */
    static long align(long n) {
        return (n + 63) & ~63L;
    }

    long layerObjectBytes(int chunk) {
        return RawTensorFormat.encodedSize(layerSpecs[chunk]);
    }

    /** Byte offset of tensor {@code t} of chunk {@code c} inside the chunk's object payload. */
    long tensorPayloadOffset(int c, int t) {
        return RawTensorFormat.HEADER_BYTES + (long) t * chunks[c].tokens() * tokenBytes;
    }
}
