package dev.kvconnector.demo;

/**
 * A decode engine's saves of its decode KV ({@link Engine.Builder#saveDecodeKv}) since it started.
 *
 * @param saves           requests whose prompt and answer chunks were inserted and committed
 * @param skipped         requests whose chunks the store already held every one of: nothing written
 * @param newChunks       chunks written that the store did not hold (as the lookup before the insert found it)
 * @param rewrittenChunks chunks written again that the store held already (a kvc-v1 insert covers every chunk)
 * @param failures        saves that failed with a store error (the request was still served)
 */
public record DecodeSaveStats(long saves, long skipped, long newChunks, long rewrittenChunks, long failures) {
}
