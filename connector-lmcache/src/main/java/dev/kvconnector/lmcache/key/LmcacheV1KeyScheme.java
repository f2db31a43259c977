package dev.kvconnector.lmcache.key;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;

/**
 * LMCache v1's chunk keys, {@code model@world_size@worker_id@chunk_hash@dtype[@tag%value]} ({@link LmcacheV1Keys}),
 * one object per chunk holding every layer. Chunks and their chained SHA-256 hashes are those of
 * {@link LmcacheV0KeyScheme}, which this scheme cuts the request with, so LMCache's chunking lives in one place;
 * engine-supplied hashes ({@link RequestTokens#ofChunkHashes}) must be lower-case hex. The dtype comes from the
 * context's layout. Stateless and thread-safe.
 */
public final class LmcacheV1KeyScheme implements KeyScheme {
    /** This scheme's name. */
    public static final String NAME = "lmcache-v1";

    private final LmcacheV0KeyScheme chunker;
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
        this.chunker = new LmcacheV0KeyScheme(LmcacheV0KeyScheme.FMT_VLLM, saveUnfullChunk);
        this.tags = Collections.unmodifiableSequencedMap(new LinkedHashMap<>(tags));
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Granularity granularity() {
        return Granularity.CHUNK;
    }

    /**
     * {@inheritDoc}
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} for a model name with {@code @}, a
     *         namespace, engine hashes that are not lower-case hex, or a bad tag
     */
    @Override
    public KeyPlan plan(KeyContext context, RequestTokens request) {
        KeyPlan chunks = chunker.plan(context, request);
        List<ChunkKeys> out = new ArrayList<>(chunks.chunks().size());
        for (ChunkKeys c : chunks.chunks()) {
            String key = LmcacheV1Keys.chunkKey(context.modelId(), context.worldSize(), context.tpRank(), c.hashHex(),
                    context.layout().dtype(), tags);
            out.add(new ChunkKeys(c.index(), c.startToken(), c.endToken(), c.hashHex(), new String[] {key}, null,
                    null));
        }
        return new KeyPlan(NAME, Granularity.CHUNK, out);
    }
}
