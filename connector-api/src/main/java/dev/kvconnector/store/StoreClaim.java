package dev.kvconnector.store;

import java.lang.foreign.MemorySegment;

/**
 * A reusable handle on bytes of a store's own memory reserved under a key by {@link KVStore#tryClaim}: write the
 * value into {@link #segment()}, then {@link #commit()} it (visible to readers) or {@link #abort()} it (never
 * visible, space returned). One handle serves one claim at a time and is reused for the next, so a producer
 * allocates nothing per claim. Not thread-safe: one owner writes and commits.
 *
 * <pre>{@code
 * StoreClaim claim = store.newClaim();              // once, per producer thread
 * if (store.tryClaim(key, bytes, options, claim) == ClaimResult.CLAIMED) {
 *     boolean committed = false;
 *     try {
 *         gather(claim.segment());                  // write every byte of the value
 *         committed = claim.commit();
 *     } finally {
 *         if (!committed) {
 *             claim.abort();
 *         }
 *     }
 * }
 * }</pre>
 *
 * <p>A claim that is never committed is never visible: when the writer aborts, or closes the store first, its bytes
 * return to the store. Until commit, readers of the key see its previous value (or a miss).
 */
public interface StoreClaim {

    /**
     * The claimed bytes, writable, exactly the size that was claimed; their content before the writer fills them is
     * unspecified. The segment must not be used after {@link #commit()} or {@link #abort()}; once the store is
     * closed, access to it throws {@link IllegalStateException} instead of touching freed memory.
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} when the handle holds no claim;
     *     {@code CLOSED} when the store is closed (which aborted the claim)
     */
    MemorySegment segment();

    /** Whether the handle holds a claim that was neither committed nor aborted. */
    boolean isClaimed();

    /**
     * Publishes the claimed bytes as the key's value, replacing any previous value, and empties the handle.
     *
     * @return true when visible; false only when the claim was made with {@link PutOptions#ifAbsent()} and another
     *     writer stored the key in the meantime (the bytes are then freed, and the other value stays)
     * @throws dev.kvconnector.error.KVException {@code CLOSED} when the store is closed (an open claim's bytes
     *     are freed by the close); {@code INVALID_ARGUMENT} when the handle holds no claim
     */
    boolean commit();

    /**
     * Frees the claimed bytes without publishing them and empties the handle. Idempotent: aborting an empty handle
     * (after a commit, an abort, or a store close) does nothing, so it is safe in a {@code finally} block.
     */
    void abort();
}
