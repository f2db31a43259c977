package dev.kvconnector.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;

/**
 * What a key binds besides the tokens: the model, the layout and the producer's place in tensor parallelism.
 *
 * @param modelId the served model's name, for example {@code meta-llama/Llama-3.1-8B}
 * @param layout this rank's KV layout
 * @param tpRank this worker's tensor-parallel rank (LMCache's worker_id)
 * @param worldSize the tensor-parallel size (LMCache's world_size)
 * @param chunkTokens tokens per chunk for chunked schemes (ignored by whole-request schemes)
 */
public record KeyContext(String modelId, KVLayout layout, int tpRank, int worldSize, int chunkTokens) {
    /** The default chunk size in tokens, as in LMCache. */
    public static final int DEFAULT_CHUNK_TOKENS = 256;

    /** Validates ranges. */
    public KeyContext {
        if (modelId == null || modelId.isEmpty() || layout == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a key context needs a model id and a layout").build();
        }
        if (tpRank < 0 || worldSize < 1 || tpRank >= worldSize || chunkTokens < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "key context: tpRank=" + tpRank + " worldSize=" + worldSize
                    + " chunkTokens=" + chunkTokens + " (need 0 <= tpRank < worldSize, chunkTokens >= 1)").build();
        }
    }

    /** A single-rank context with 256-token chunks. */
    public static KeyContext of(String modelId, KVLayout layout) {
        return new KeyContext(modelId, layout, 0, 1, DEFAULT_CHUNK_TOKENS);
    }

    /** This context with another chunk size. */
    public KeyContext withChunkTokens(int tokens) {
        return new KeyContext(modelId, layout, tpRank, worldSize, tokens);
    }

    /** This context for another rank. */
    public KeyContext withRank(int rank, int size) {
        return new KeyContext(modelId, layout, rank, size, chunkTokens);
    }
}
