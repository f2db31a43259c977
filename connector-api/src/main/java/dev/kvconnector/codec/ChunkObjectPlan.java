package dev.kvconnector.codec;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyPlan;

/**
 * What every plan with one object per chunk, holding all its layers ({@link Completion#PER_CHUNK}), shares: the
 * chunks of its key plan, and the chunk's one key for every layer. LMCache's chunks and vLLM's objects extend it.
 */
public abstract class ChunkObjectPlan implements ObjectPlan {
    private final KeyPlan keys;
    private final ChunkKeys[] chunks;

    /** A plan of {@code keys}' chunks. */
    protected ChunkObjectPlan(KeyPlan keys) {
        this.keys = keys;
        this.chunks = keys.chunks().toArray(new ChunkKeys[0]);
    }

    /** Chunk {@code c} of the key plan. */
    protected final ChunkKeys chunk(int c) {
        return chunks[c];
    }

    @Override
    public final KeyPlan keys() {
        return keys;
    }

    @Override
    public final int chunks() {
        return chunks.length;
    }

    @Override
    public final Completion completion() {
        return Completion.PER_CHUNK;
    }

    /** The chunk's one object, whatever the layer. */
    @Override
    public final String layerKey(int chunk, int layer) {
        return chunks[chunk].layerKey(0);
    }
}
