package dev.kvconnector.lmcache.format;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * The dimensions of one LMCache chunk.
 *
 * @param layers       number of layers (L)
 * @param tokens       tokens in this chunk (T), at most the chunk size; the trailing chunk may be shorter
 * @param heads        KV heads (H); 1 for MLA
 * @param headSize     elements per head (D); the latent width for MLA
 * @param elementBytes bytes per element (2 for bf16/fp16)
 */
public record LmChunkGeometry(int layers, int tokens, int heads, int headSize, int elementBytes) {
    /** Validates that every dimension is positive. */
    public LmChunkGeometry {
        if (layers < 1 || tokens < 1 || heads < 1 || headSize < 1 || elementBytes < 1) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "chunk dimensions must be positive: layers=" + layers
                    + " tokens=" + tokens + " heads=" + heads + " headSize=" + headSize + " elementBytes="
                    + elementBytes).build();
        }
    }

    /** Bytes of one token of one K or V tensor: heads x headSize x elementBytes. */
    public long tokenBytes() {
        return (long) heads * headSize * elementBytes;
    }

    /** Bytes of this chunk's tokens in one K or V tensor of one layer. */
    public long tensorBytes() {
        return tokens * tokenBytes();
    }
}
