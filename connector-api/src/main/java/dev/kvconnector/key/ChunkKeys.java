package dev.kvconnector.key;

/**
 * The keys of one chunk of a request.
 *
 * @param index the chunk's position, from 0
 * @param startToken first token of the chunk (inclusive)
 * @param endToken end of the chunk (exclusive)
 * @param hashHex the chunk's (chained) hash in lower-case hex
 * @param layerKeys for {@link Granularity#CHUNK_LAYER} one key per layer; otherwise one key holding every layer
 * @param hiddenKey the hidden-state object's key, or null when the scheme keeps none
 * @param manifestKey the manifest's key, or null when the scheme writes none (visibility is then the last object)
 */
public record ChunkKeys(int index, int startToken, int endToken, String hashHex, String[] layerKeys, String hiddenKey,
                        String manifestKey) {
    /** Tokens in this chunk. */
    public int tokens() {
        return endToken - startToken;
    }
}
