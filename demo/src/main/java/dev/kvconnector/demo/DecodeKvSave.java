package dev.kvconnector.demo;

import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A decode engine's save of a finished request's KV, prompt and generated tokens together (LMCache's
 * {@code save_decode_cache}; a vLLM V1 connector whose {@code request_finished} saves the whole request), so that a
 * later prompt that extends the conversation finds the answer's KV in the store too, and not only the prompt's that
 * P stored. Only the decode engine ever has the answer's KV.
 *
 * <ul>
 *   <li>What: the full chunks of the first {@code computed} tokens of prompt + generated tokens, under the connector's
 *       content-addressed keys without a transfer id (the ones P's inserts use), so a prompt that starts with them
 *       hashes to them. The last generated token is never fed back, so its KV was never computed; a trailing partial
 *       chunk is left out, since no longer prompt hashes to it.</li>
 *   <li>Chunks the store holds: looked up first ({@link KVStoreConnector#lookup}); when the store holds every chunk,
 *       nothing is written. Otherwise every chunk is inserted: a kvc-v1 insert covers every chunk from the first (the
 *       connector skips objects already stored only for codecs whose objects hold whole chunks,
 *       {@code skipExisting}), so the chunks the store held are written again with the same KV, and counted apart
 *       ({@link DecodeSaveStats#rewrittenChunks}).</li>
 *   <li>Events: the connector's commit emits a {@code Stored} event per chunk, with the store's URI as medium, as
 *       for P's inserts, so a cache-aware proxy learns that the store holds the conversation so far.</li>
 *   <li>When: after the decode, before the engine answers the request's end, so the conversation's next turn finds
 *       it (vLLM's connectors save asynchronously and free the blocks afterwards; the demo keeps it simple).</li>
 * </ul>
 * A failed save is logged and counted, never the request's failure. Thread-safe.
 */
final class DecodeKvSave {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeKvSave.class);

    private final KVStoreConnector connector;
    private final int chunkTokens;
    private final int layers;
    private final LongAdder saves = new LongAdder();
    private final LongAdder skipped = new LongAdder();
    private final LongAdder newChunks = new LongAdder();
    private final LongAdder rewrittenChunks = new LongAdder();
    private final LongAdder failures = new LongAdder();

    /**
     * @param connector a connector whose keys bind no transfer id and whose objects hold no hidden states (the engine
     *                  checks both)
     * @param layers    the model's layers
     */
    DecodeKvSave(KVStoreConnector connector, int layers) {
        this.connector = connector;
        this.chunkTokens = connector.keyContext().chunkTokens();
        this.layers = layers;
    }

    /**
     * Saves the full chunks of {@code sequence}'s first {@code computed} tokens from {@code cache} through
     * {@code table}, unless the store holds them all.
     *
     * @param sequence the prompt followed by the generated tokens
     * @param computed tokens of {@code sequence} whose KV is in the cache: all but the last generated one
     * @param table    the request's blocks, covering at least {@code computed} tokens
     * @return chunks written, 0 when there was nothing to write, the store held every chunk, or the save failed
     */
    int save(int[] sequence, int computed, PagedKVCache cache, BlockTable table) {
        int chunks = computed / chunkTokens;
        if (chunks == 0) {
            return 0;
        }
        RequestTokens request = RequestTokens.of(Arrays.copyOf(sequence, chunks * chunkTokens));
        try {
            int held = connector.lookup(request) / chunkTokens;
            if (held >= chunks) {
                skipped.increment();
                return 0;
            }
            try (InsertSession insert = connector.beginInsert(request)) {
                for (int l = 0; l < layers; l++) {
                    insert.putLayer(l, cache, table);
                }
                insert.commit();
            }
            saves.increment();
            newChunks.add(chunks - held);
            rewrittenChunks.add(held);
            return chunks;
        } catch (KVException e) {
            failures.increment();
            LOG.warn("saving the decode KV of {} tokens into {} failed; the next turn recomputes what is missing: {}",
                    request.totalTokens(), connector.endpoint(), e.getMessage());
            return 0;
        }
    }

    /** The counters since the engine started. */
    DecodeSaveStats stats() {
        return new DecodeSaveStats(saves.sum(), skipped.sum(), newChunks.sum(), rewrittenChunks.sum(), failures.sum());
    }
}
