package dev.kvconnector.lmcache.key;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;

/**
 * LMCache's 2024 keys, so that kvconnector can share chunks with LMCache 2024 engines and servers: one object per
 * chunk holding every layer, keyed {@code "{fmt}@{model}@{world_size}@{worker_id}@{chunk_hash}"}, where
 * {@code world_size} is {@link KeyContext#worldSize()} and {@code worker_id} is {@link KeyContext#tpRank()}.
 *
 * <p>Chunks, their chained SHA-256 hashes, the partial-chunk rule and the refusals are those of every LMCache scheme
 * ({@link LmcacheKeyScheme}); LMCache parses a 2024 key into exactly five {@code @}-separated parts.
 */
public final class LmcacheV0KeyScheme extends LmcacheKeyScheme {
    /** This scheme's name. */
    public static final String NAME = "lmcache-v0";
    /** The {@code fmt} of vLLM's layout, {@code [num_layers, 2, T, H, D]} per chunk. */
    public static final String FMT_VLLM = "vllm";
    /** The {@code fmt} of Hugging Face's layout, {@code [num_layers, 2, H, T, D]} per chunk. */
    public static final String FMT_HUGGINGFACE = "huggingface";

    private final String fmt;

    /** The ServiceLoader instance: fmt {@code vllm}, trailing partial chunks kept (LMCache's defaults). */
    public LmcacheV0KeyScheme() {
        this(FMT_VLLM, true);
    }

    /**
     * A scheme with the given format and partial-chunk rule.
     *
     * @param fmt {@code vllm} or {@code huggingface}
     * @param saveUnfullChunk whether the trailing partial chunk is keyed (LMCache's {@code save_unfull_chunk})
     */
    public LmcacheV0KeyScheme(String fmt, boolean saveUnfullChunk) {
        super(NAME, saveUnfullChunk);
        if (!FMT_VLLM.equals(fmt) && !FMT_HUGGINGFACE.equals(fmt)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "unknown LMCache key format '" + fmt + "'")
                    .hint("LMCache 2024 keys use fmt 'vllm' or 'huggingface'").build();
        }
        this.fmt = fmt;
    }

    /** The key's {@code fmt} part. */
    public String fmt() {
        return fmt;
    }

    @Override
    String chunkKey(KeyContext context, String workerPrefix, String chunkHash) {
        return fmt + '@' + workerPrefix + chunkHash;
    }
}
