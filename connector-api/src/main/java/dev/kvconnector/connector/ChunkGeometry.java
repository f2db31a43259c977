package dev.kvconnector.connector;

import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;

/**
 * Sizes and offsets of one request's layer objects in a staging segment, computed once per request from the
 * codec's {@link ObjectPlan}: a layer's staging holds every chunk's object of that layer back to back, each on a
 * 64-byte boundary. Every size and offset is in bytes. Immutable.
 */
public final class ChunkGeometry {
    /** Manifest payload: int64 start token, end token, layer count, flags. */
    static final TensorSpec MANIFEST_SPEC = TensorSpec.of(DType.INT64, 4);
    static final long MANIFEST_BYTES = RawTensorFormat.encodedSize(MANIFEST_SPEC);
    static final long FLAG_HIDDEN = 1;

    final ObjectPlan objects;
    final KeyPlan plan;
    final ChunkKeys[] chunks;
    final long[] layerOffsets;
    final long[] layerObjectBytes;
    final long layerStagingBytes;
    /** Bytes of one layer's objects of every chunk, without alignment gaps. */
    final long layerBytes;
    final long tokenBytes;
    final int tensors;

    ChunkGeometry(ObjectPlan objects, KVLayout layout) {
        this.objects = objects;
        this.plan = objects.keys();
        this.chunks = plan.chunks().toArray(new ChunkKeys[0]);
        this.tokenBytes = layout.bytesPerTokenPerTensor();
        this.tensors = layout.tensorsPerLayer();
        this.layerOffsets = new long[chunks.length];
        this.layerObjectBytes = new long[chunks.length];
        long off = 0;
        long bytes = 0;
        for (int c = 0; c < chunks.length; c++) {
            layerOffsets[c] = off;
            layerObjectBytes[c] = objects.layerObjectBytes(c, 0);
            off += align(layerObjectBytes[c]);
            bytes += layerObjectBytes[c];
        }
        this.layerStagingBytes = off;
        this.layerBytes = bytes;
    }

    /** Writes the keys of layer {@code layer}'s objects of the first {@code count} chunks into {@code into}. */
    void layerKeys(int layer, StoreKey[] into, int count) {
        for (int c = 0; c < count; c++) {
            objects.layerKey(c, layer, into[c]);
        }
    }

    /** Objects start on 64-byte boundaries in staging, so copies stay cache-line aligned. */
    static long align(long n) {
        return (n + 63) & ~63L;
    }

    /** The codec's plan of the request's objects. */
    public ObjectPlan objects() {
        return objects;
    }

    /** Chunks of the request. */
    public int chunkCount() {
        return chunks.length;
    }

    /** First token of chunk {@code c}. */
    public int startToken(int c) {
        return chunks[c].startToken();
    }

    /** Tokens of chunk {@code c}. */
    public int tokens(int c) {
        return chunks[c].tokens();
    }

    /** Tokens of the request covered by its chunks. */
    public int totalTokens() {
        return plan.totalTokens();
    }

    /** Tensors per layer: 2 (K and V) or 1 (the MLA latent). */
    public int tensors() {
        return tensors;
    }

    /** Bytes of a staging segment that holds one layer's objects of every chunk. */
    public long layerStagingBytes() {
        return layerStagingBytes;
    }

    /** Offset of chunk {@code c}'s layer object in a layer's staging. */
    public long layerOffset(int c) {
        return layerOffsets[c];
    }

    /** Size of chunk {@code c}'s layer object. */
    public long layerObjectBytes(int c) {
        return layerObjectBytes[c];
    }

    /** Bytes of the first {@code chunks} chunks' objects in a layer's staging, alignment gaps included. */
    public long objectsBytes(int chunks) {
        return layerOffsets[chunks - 1] + layerObjectBytes[chunks - 1];
    }

    /** Byte offset of tensor {@code t} of chunk {@code c} inside the chunk's layer object. */
    public long tensorPayloadOffset(int c, int t) {
        return objects.placement(c, 0, t).offset();
    }
}
