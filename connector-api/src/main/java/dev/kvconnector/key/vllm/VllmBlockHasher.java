package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * vLLM V1's prefix-caching block hash ({@code hash_block_tokens} and {@code get_request_block_hasher} in
 * {@code vllm/v1/core/kv_cache_utils.py}, after PR #51875):
 * {@code h_i = H((h_{i-1}, tuple(tokens[i*B:(i+1)*B]), extra_keys_i))} over full blocks of {@code B} tokens only,
 * with {@code h_{-1} = NONE_HASH = H(seed)}, where {@code H} is one of {@link VllmHashAlgorithm} and {@code seed}
 * is a Python {@code str}: the {@code PYTHONHASHSEED} the vLLM processes run with, or, when it is unset,
 * {@code "vllm-none-hash"} for the SHA-256 algorithms. With it unset, vLLM draws the xxhash algorithms'
 * {@code NONE_HASH} at random, and so does every algorithm in vLLM before #51875; nobody can reproduce those
 * hashes, so this class refuses that combination instead of producing hashes that match nothing.
 *
 * <p>Instances are immutable and thread-safe.
 */
public final class VllmBlockHasher {
    /** The seed vLLM uses for the SHA-256 algorithms when {@code PYTHONHASHSEED} is unset. */
    public static final String DEFAULT_SEED = "vllm-none-hash";

    private final VllmHashAlgorithm algorithm;
    private final byte[] noneHash;

    private VllmBlockHasher(VllmHashAlgorithm algorithm, byte[] noneHash) {
        this.algorithm = algorithm;
        this.noneHash = noneHash;
    }

    /**
     * The hasher of a vLLM deployment.
     *
     * @param algorithm vLLM's {@code prefix_caching_hash_algo}
     * @param pythonHashSeed the {@code PYTHONHASHSEED} of the vLLM processes, or null when it is unset
     */
    public static VllmBlockHasher of(VllmHashAlgorithm algorithm, String pythonHashSeed) {
        Objects.requireNonNull(algorithm, "algorithm");
        String seed = pythonHashSeed;
        if (seed == null) {
            if (algorithm.randomNoneHashWithoutSeed()) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "hash seed: vLLM's " + algorithm.vllmName()
                                + " draws NONE_HASH at random when PYTHONHASHSEED is unset, so its block hashes cannot"
                                + " be reproduced")
                        .hint("run vLLM with PYTHONHASHSEED set and pass the same value as the hash seed, or use"
                                + " sha256 / sha256_cbor")
                        .build();
            }
            seed = DEFAULT_SEED;
        } else if (seed.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "hash seed is empty")
                    .hint("pass the PYTHONHASHSEED value the vLLM processes run with, or no seed when it is unset")
                    .build();
        }
        PythonValueWriter w = algorithm.newWriter();
        w.str(seed);
        return new VllmBlockHasher(algorithm, algorithm.digest(w.finish()));
    }

    /** The algorithm. */
    public VllmHashAlgorithm algorithm() {
        return algorithm;
    }

    /** {@code NONE_HASH}, the parent of block 0 (a copy; {@link VllmHashAlgorithm#digestBytes()} bytes). */
    public byte[] noneHash() {
        return noneHash.clone();
    }

    /**
     * One block's hash.
     *
     * @param parent the previous block's hash, or {@link #noneHash()} for block 0
     * @param tokens token ids; the block is {@code tokens[from, to)}
     * @param extraKeys the block's {@code extra_keys} strings, or null for {@code None}
     */
    public byte[] blockHash(byte[] parent, int[] tokens, int from, int to, List<String> extraKeys) {
        Objects.checkFromToIndex(from, to, tokens.length);
        PythonValueWriter w = algorithm.newWriter();
        w.beginTuple(3);
        w.bytes(parent);
        w.beginTuple(to - from);
        for (int i = from; i < to; i++) {
            w.integer(tokens[i]);
        }
        w.endTuple(to - from);
        if (extraKeys == null) {
            w.none();
        } else {
            w.beginTuple(extraKeys.size());
            for (String k : extraKeys) {
                w.str(k);
            }
            w.endTuple(extraKeys.size());
        }
        w.endTuple(3);
        return algorithm.digest(w.finish());
    }

    /**
     * The chained hashes of every full block of {@code tokens}, in order; a trailing partial block gets none.
     *
     * @param tokens the request's token ids
     * @param blockTokens tokens per hashed block ({@code hash_block_size}), at least 1
     * @param extra the request's LoRA name and cache salt
     */
    public List<byte[]> blockHashes(int[] tokens, int blockTokens, VllmExtraKeys extra) {
        if (blockTokens < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "block size " + blockTokens + " tokens: must be at least 1")
                    .build();
        }
        int blocks = tokens.length / blockTokens;
        List<byte[]> out = new ArrayList<>(blocks);
        byte[] parent = noneHash;
        for (int b = 0; b < blocks; b++) {
            parent = blockHash(parent, tokens, b * blockTokens, (b + 1) * blockTokens, extra.forBlock(b));
            out.add(parent);
        }
        return out;
    }
}
