package dev.kvconnector.demo;

/**
 * An engine's own prefix cache ({@link Engine.Builder#prefixCache}): its chunk size, what it holds now, and what it
 * has done since the engine started.
 *
 * @param chunkTokens   tokens per cached chunk
 * @param chunks        chunks cached now
 * @param blocks        paged-cache blocks those chunks occupy
 * @param heldChunks    cached chunks that running requests reuse now (never evicted while held)
 * @param hitTokens     prompt tokens reused from the cache instead of computed
 * @param storedChunks  chunks cached
 * @param evictedChunks chunks evicted to free blocks (least recently used first)
 */
public record PrefixCacheStats(int chunkTokens, long chunks, long blocks, long heldChunks, long hitTokens,
                               long storedChunks, long evictedChunks) {
}
