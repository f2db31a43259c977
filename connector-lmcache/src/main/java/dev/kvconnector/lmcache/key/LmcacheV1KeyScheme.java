package dev.kvconnector.lmcache.key;

import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.RequestTokens;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SequencedMap;

/**
 * LMCache v1's chunk keys, {@code model@world_size@worker_id@chunk_hash@dtype[@tag%value]} ({@link LmcacheV1Keys}),
 * one object per chunk holding every layer. Chunks and their chained SHA-256 hashes are those of
 * {@link LmcacheV0KeyScheme}: both come from {@link LmcacheKeyScheme}, so LMCache's chunking lives in one place.
 * Engine-supplied hashes ({@link RequestTokens#ofChunkHashes}) must be lower-case hex. The dtype comes from the
 * context's layout; a bad tag is refused when a key is written. Stateless and thread-safe.
 */
public final class LmcacheV1KeyScheme extends LmcacheKeyScheme {
    /** This scheme's name. */
    public static final String NAME = "lmcache-v1";

    private final SequencedMap<String, String> tags;

    /** The ServiceLoader instance: trailing partial chunks kept, no tags (LMCache's defaults). */
    public LmcacheV1KeyScheme() {
        this(true, Map.of());
    }

    /**
     * A scheme with the given partial-chunk rule and key tags.
     *
     * @param saveUnfullChunk whether the trailing partial chunk is keyed (LMCache's {@code save_unfull_chunk})
     * @param tags tags appended as {@code @name%value}, in this map's order
     */
    public LmcacheV1KeyScheme(boolean saveUnfullChunk, Map<String, String> tags) {
        super(NAME, saveUnfullChunk);
        this.tags = Collections.unmodifiableSequencedMap(new LinkedHashMap<>(tags));
    }

    @Override
    String chunkKey(KeyContext context, String workerPrefix, String chunkHash) {
        return LmcacheV1Keys.keyAfter(workerPrefix, chunkHash, context.layout().dtype(), -1, tags);
    }
}
