package dev.kvconnector.key;

import java.util.List;

/**
 * Turns a request into store keys. Implementations are stateless and thread-safe, and found through
 * {@link java.util.ServiceLoader} by {@link KeySchemes#byName(String)}.
 */
public interface KeyScheme {
    /** The scheme's name, such as {@code kvc-v1}, {@code vllm-v0} or {@code lmcache-v0}. */
    String name();

    /** How this scheme cuts a request into objects. */
    Granularity granularity();

    /**
     * Whether a key names one value forever: it binds everything the value depends on (model, layout, rank and
     * every token of the prefix), so a store may keep an existing value instead of replacing it
     * ({@code PutOptions.immutable()}). Default false.
     */
    default boolean contentAddressed() {
        return false;
    }

    /**
     * Whether keys bind a request's namespace ({@link RequestTokens#inNamespace}); a scheme that returns false
     * refuses a request with one (vLLM's and LMCache's keys have no place for it). Default true.
     */
    default boolean bindsNamespace() {
        return true;
    }

    /**
     * Keys of other ranks that must exist, besides {@code chunk}'s own objects, before a lookup counts the chunk as
     * a hit: none by default; vLLM V1 names the block's key in every rank namespace that will load it, as vLLM's
     * lookup does with tensor or pipeline parallelism.
     */
    default List<String> peerLookupKeys(KeyContext context, ChunkKeys chunk) {
        return List.of();
    }

    /**
     * The hash of the chunk that the object under {@code key} belongs to, lower-case hex as
     * {@link ChunkKeys#hashHex()}, or null when the key is not this scheme's or does not name its chunk. A
     * connector uses it to turn a store's events about objects into events about chunks. Default null.
     */
    default String chunkHashOf(String key) {
        return null;
    }

    /** Computes every key of {@code request}. */
    KeyPlan plan(KeyContext context, RequestTokens request);

    /**
     * Rewrites {@code plan}, which this scheme's {@link #plan} made for {@code context}, in place for
     * {@code request}, when the two requests have the same shape (the same chunks with the same token ranges): only
     * the chunks' hashes, and so their keys, change, and planning allocates nothing. Whoever holds the plan sees the
     * new keys, so only the plan's owner may call it.
     *
     * @return whether the plan now names {@code request}'s objects; false, with the plan unchanged, when the shapes
     *     differ or the scheme cannot rewrite plans (the default)
     */
    default boolean replan(KeyContext context, RequestTokens request, KeyPlan plan) {
        return false;
    }
}
