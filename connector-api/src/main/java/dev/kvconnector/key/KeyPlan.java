package dev.kvconnector.key;

import java.util.List;

/**
 * Every key of one request, chunk by chunk, in token order.
 *
 * @param scheme the scheme's name
 * @param granularity how objects are cut
 * @param chunks the chunks, covering the request's tokens in order
 */
public record KeyPlan(String scheme, Granularity granularity, List<ChunkKeys> chunks) {
    /** Copies the list. */
    public KeyPlan {
        chunks = List.copyOf(chunks);
    }

    /** Tokens covered by all chunks. */
    public int totalTokens() {
        return chunks.isEmpty() ? 0 : chunks.getLast().endToken();
    }
}
