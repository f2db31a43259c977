package dev.kvconnector.connector;

/**
 * The outcome of a drop-select: how many prompt tokens now have their KV in the target, or why none do.
 *
 * @param matchedTokens tokens whose KV (and hidden states, if asked for) were written into the target; 0 on a miss
 * @param requestedTokens the request's prompt tokens
 * @param reason null on a hit, otherwise why nothing was loaded
 * @param detail a human-readable explanation of a miss (key, sizes, statuses), or null
 */
public record DropResult(int matchedTokens, int requestedTokens, MissReason reason, String detail) {
    /** A hit of {@code matched} of {@code requested} tokens. */
    public static DropResult hit(int matched, int requested) {
        return new DropResult(matched, requested, null, null);
    }

    /** A miss. */
    public static DropResult miss(int requested, MissReason reason, String detail) {
        return new DropResult(0, requested, reason, detail);
    }

    /** Whether any tokens were loaded. */
    public boolean isHit() {
        return reason == null && matchedTokens > 0;
    }

    /** Whether every prompt token was loaded, so the engine can skip the prefill entirely. */
    public boolean isComplete() {
        return isHit() && matchedTokens == requestedTokens;
    }
}
