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
     * The prompt tokens the index expects prefill instance {@code p} (-1: one without events) to reuse from its own
     * cache: its cached prefix, up to the last chunk that ends before the prompt's last token, which an engine
     * computes for the first output's logits (as vLLM does). A prefill instance is a producer: it computes what its
     * own cache lacks and reads nothing from the shared store, so the store's prefix does not count (one that does,
     * kv_both, reports more: counted under). 0 for an unhashed request.
     */
    int predictedPrefillTokens(int p) {
        return chunkTokens == 0 ? 0 : tokens(Math.min(overlap(p), (promptTokens - 1) / chunkTokens));
    }

    /**
     * The prompt tokens the index expects a decode-only D to load: the store's prefix (the whole prompt for
     * {@link KvMetrics.Reason#STORE_HIT}, all but a short suffix for {@link KvMetrics.Reason#STORE_PREFIX}).
     */
    int predictedDecodeOnlyTokens() {
        return tokens(storePrefix);
    }

    /**
     * Whether D alone serves the request, and why: {@link KvMetrics.Reason#STORE_HIT} when the shared store holds
     * every chunk of the prompt; {@link KvMetrics.Reason#STORE_PREFIX} when it holds at least one leading chunk and
     * at most {@code maxSuffixTokens} prompt tokens follow them, which D computes after loading the prefix (0: never);
     * otherwise null, and P prefills. A prompt with nothing in the store goes to P however short it is: D would find
     * nothing to load.
     *
     * @param maxSuffixTokens {@link ProxyConfig#kvDecodeMaxSuffix()}, in tokens
     */
    KvMetrics.Reason decodeOnly(int maxSuffixTokens) {
        if (storeHoldsPrompt()) {
            return KvMetrics.Reason.STORE_HIT;
        }
        return unhashed == null && storePrefix > 0 && promptTokens - tokens(storePrefix) <= maxSuffixTokens
                ? KvMetrics.Reason.STORE_PREFIX : null;
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
