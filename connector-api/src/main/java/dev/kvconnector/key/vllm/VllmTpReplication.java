package dev.kvconnector.key.vllm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * How many TP ranks hold byte-identical KV of one cache group, and so share one key namespace
 * ({@code _spec_tp_replication_factor} in vLLM's {@code .../mooncake/store/worker.py}): 1 with DCP, since each DCP
 * rank holds other tokens; {@code tp_size} for MLA, whose latent is the same on every rank; otherwise
 * {@code max(1, tp_size / total_num_kv_heads)}, so GQA ranks that share a KV head share a namespace. Mamba groups
 * (factor 1) are not covered.
 */
public final class VllmTpReplication {
    private VllmTpReplication() {
    }

    /**
     * The replication factor.
     *
     * @param mla whether the group is MLA
     * @param tpSize the tensor-parallel size
     * @param totalKvHeads the model's KV heads over all ranks ({@code total_num_kv_heads}); ignored for MLA
     * @param dcpSize the decode-context-parallel size (1 without DCP)
     */
    public static int factor(boolean mla, int tpSize, int totalKvHeads, int dcpSize) {
        if (tpSize < 1 || dcpSize < 1 || (!mla && totalKvHeads < 1)) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "TP replication: tp_size=" + tpSize + " kv_heads="
                    + totalKvHeads + " dcp_size=" + dcpSize + ": each must be at least 1").build();
        }
        if (dcpSize > 1) {
            return 1;
        }
        if (mla) {
            return tpSize;
        }
        return Math.max(1, tpSize / totalKvHeads);
    }
}
