package dev.kvconnector.demo;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.MissReason;

/**
 * The outcome of one {@link Engine#generate} call.
 *
 * @param tokens the generated token ids, greedy, in order
 * @param promptTokens tokens in the prompt
 * @param prefill where the prompt's KV came from
 * @param missReason why the store could not supply the prefill, or null (a hit, or no lookup)
 * @param kvTransferParams what a producer answers so the decode side finds its KV (transfer id,
 *     {@code do_remote_prefill}), or null for other roles
 */
public record Generation(int[] tokens, int promptTokens, PrefillSource prefill, MissReason missReason,
                         KVTransferParams kvTransferParams) {
    /** Where a request's prompt KV came from. */
    public enum PrefillSource {
        /** Computed here (no lookup, a miss, or a failed load). */
        COMPUTED,
        /** Loaded whole from the store; no prefill forward pass ran. */
        LOADED,
        /** A prefix loaded from the store, the rest computed here. */
        PARTIAL,
        /** A prefix reused from this engine's own prefix cache, the rest computed here. */
        CACHED
    }
}
