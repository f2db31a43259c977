package dev.kvconnector.store;

/** How strongly a store should keep an object against eviction, where the store supports pinning. */
public enum Pin {
    /** Evictable as usual. */
    NONE,
    /** Evicted last (Mooncake soft pin). */
    SOFT,
    /** Never evicted (Mooncake hard pin). */
    HARD
}
