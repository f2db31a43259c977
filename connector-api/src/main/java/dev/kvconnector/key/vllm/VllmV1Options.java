package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.Objects;

/**
 * What a {@code vllm-v1} key binds beyond a {@link dev.kvconnector.key.KeyContext}: the vLLM deployment's hash
 * settings, cache prefix and parallel placement. The TP rank and size come from the context.
 *
 * @param hash vLLM's {@code prefix_caching_hash_algo}
 * @param hashSeed the {@code PYTHONHASHSEED} of the vLLM processes, or null when unset
 * @param cachePrefix {@code kv_connector_extra_config["cache_prefix"]}, empty for none
 * @param totalKvHeads the model's KV heads over all TP ranks ({@code total_num_kv_heads}), or 0 to take it from the
 *     context's layout (this rank's heads times the TP size), which is refused where it is ambiguous
 * @param pcpRank this rank's place in the prefill-context-parallel group
 * @param pcpSize the prefill-context-parallel size, 1 without PCP
 * @param dcpSize the decode-context-parallel size, 1 without DCP; a rank's DCP rank is its TP rank modulo this, as
 *     in vLLM, where the DCP groups subdivide the TP group
 * @param ppRank this rank's pipeline-parallel rank ({@code (rank // tp_size) % pp_size} in vLLM)
 * @param ppSize the pipeline-parallel size
 * @param group the KV-cache group, 0 for models with one group
 * @param hashBlockTokens tokens per hashed block ({@code hash_block_size}), or 0 for the block size; a block's key
 *     uses the last hash inside the block
 */
public record VllmV1Options(VllmHashAlgorithm hash, String hashSeed, String cachePrefix, int totalKvHeads,
                            int pcpRank, int pcpSize, int dcpSize, int ppRank, int ppSize, int group,
                            int hashBlockTokens) {
    /** vLLM's defaults: sha256, PYTHONHASHSEED unset, no cache prefix, no PCP, DCP or PP, group 0. */
    public static final VllmV1Options DEFAULTS = new VllmV1Options(VllmHashAlgorithm.SHA256, null, "", 0, 0, 1, 1, 0,
            1, 0, 0);

    /** Validates ranges; each error names the field. */
    public VllmV1Options {
        Objects.requireNonNull(hash, "hash");
        cachePrefix = cachePrefix == null ? "" : cachePrefix;
        if (totalKvHeads < 0 || hashBlockTokens < 0 || group < 0) {
            throw invalid("kv_heads=" + totalKvHeads + " hash_block_size=" + hashBlockTokens + " group=" + group
                    + ": none may be negative");
        }
        if (pcpSize < 1 || pcpRank < 0 || pcpRank >= pcpSize) {
            throw invalid("pcp rank " + pcpRank + " of pcp size " + pcpSize + " (need 0 <= rank < size)");
        }
        if (ppSize < 1 || ppRank < 0 || ppRank >= ppSize) {
            throw invalid("pp rank " + ppRank + " of pp size " + ppSize + " (need 0 <= rank < size)");
        }
        if (dcpSize < 1) {
            throw invalid("dcp size " + dcpSize + " (need at least 1)");
        }
    }

    private static KVException invalid(String detail) {
        return KVException.of(ErrorCode.INVALID_ARGUMENT, "vllm-v1 options: " + detail).build();
    }

    /** These options with another hash algorithm and seed (null for PYTHONHASHSEED unset). */
    public VllmV1Options withHash(VllmHashAlgorithm algorithm, String seed) {
        return new VllmV1Options(algorithm, seed, cachePrefix, totalKvHeads, pcpRank, pcpSize, dcpSize, ppRank, ppSize,
                group, hashBlockTokens);
    }

    /** These options with another cache prefix (empty for none). */
    public VllmV1Options withCachePrefix(String prefix) {
        return new VllmV1Options(hash, hashSeed, prefix, totalKvHeads, pcpRank, pcpSize, dcpSize, ppRank, ppSize, group,
                hashBlockTokens);
    }

    /** These options with the model's total KV heads. */
    public VllmV1Options withTotalKvHeads(int heads) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, heads, pcpRank, pcpSize, dcpSize, ppRank, ppSize, group,
                hashBlockTokens);
    }

    /** These options with another PCP rank and size. */
    public VllmV1Options withPcp(int rank, int size) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, totalKvHeads, rank, size, dcpSize, ppRank, ppSize, group,
                hashBlockTokens);
    }

    /** These options with another DCP size. */
    public VllmV1Options withDcpSize(int size) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, totalKvHeads, pcpRank, pcpSize, size, ppRank, ppSize,
                group, hashBlockTokens);
    }

    /** These options with another PP rank and size. */
    public VllmV1Options withPp(int rank, int size) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, totalKvHeads, pcpRank, pcpSize, dcpSize, rank, size,
                group, hashBlockTokens);
    }

    /** These options for another KV-cache group. */
    public VllmV1Options withGroup(int kvCacheGroup) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, totalKvHeads, pcpRank, pcpSize, dcpSize, ppRank, ppSize,
                kvCacheGroup, hashBlockTokens);
    }

    /** These options with another hash block size in tokens (0 for the block size). */
    public VllmV1Options withHashBlockTokens(int tokens) {
        return new VllmV1Options(hash, hashSeed, cachePrefix, totalKvHeads, pcpRank, pcpSize, dcpSize, ppRank, ppSize,
                group, tokens);
    }
}
