package dev.kvconnector.proxy;

/**
 * What the prefix index says about one request: its chunks, how many the shared store holds from the first, and how
 * many each publisher holds in its own cache. Built once per request by {@link KvRouter#route}.
 */
final class KvRoute {
    /** The route of a request the proxy cannot hash, with {@code reason}. */
    static KvRoute unhashed(KvMetrics.Reason reason) {
        return new KvRoute(reason, 0, 0, 0, 0, null);
    }

    /** Why, when the request could not be hashed; null when it was. */
    final KvMetrics.Reason unhashed;
    final int chunks;
    final int storePrefix;
    /** Tokens in the prompt, and in each of its chunks but the last (which may be shorter). */
    private final int promptTokens;
    private final int chunkTokens;
    /** Leading chunks in each publisher's own cache, by publisher number. */
    private final int[] local;

    KvRoute(KvMetrics.Reason unhashed, int chunks, int storePrefix, int promptTokens, int chunkTokens, int[] local) {
        this.unhashed = unhashed;
        this.chunks = chunks;
        this.storePrefix = storePrefix;
        this.promptTokens = promptTokens;
        this.chunkTokens = chunkTokens;
        this.local = local;
    }

    /**
     * The prompt tokens the index expects publisher {@code p} (-1: an instance without events) to load: its own
     * cached prefix or the shared store's, whichever is longer. 0 for an unhashed request.
     */
    int predictedTokens(int p) {
        return tokens(Math.max(overlap(p), storePrefix));
    }

    /** The prompt tokens in its first {@code leadingChunks} chunks. */
    private int tokens(int leadingChunks) {
        return (int) Math.min((long) leadingChunks * chunkTokens, promptTokens);
    }

    /** Whether the shared store holds every chunk of the prompt, so D can load it all and P is not needed. */
    boolean storeHoldsPrompt() {
        return unhashed == null && chunks > 0 && storePrefix == chunks;
    }

    /** Leading chunks of the prompt in publisher {@code p}'s own cache (0 for -1, an instance without events). */
    int overlap(int p) {
        return p < 0 || local == null ? 0 : local[p];
    }
}
