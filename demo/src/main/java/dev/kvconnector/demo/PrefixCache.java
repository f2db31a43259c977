package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventListener;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine's own prefix cache, as vLLM's automatic prefix caching: the full chunks of a finished request stay in
 * the paged cache, indexed by chunk hash, and a later prompt that starts with them reuses their blocks instead of
 * computing them again.
 *
 * <ul>
 *   <li><b>Hashes</b> are kvc-v1's chained chunk hashes from the connector's root
 *       ({@link KvcV1KeyScheme#planFromRoot}): what the store keys and the proxy's router compute, so an event about a
 *       chunk here names what the router hashes.</li>
 *   <li><b>What is cached</b>: the full chunks of the tokens whose KV the request wrote (the prompt and every
 *       generated token but the last, which is never fed back). A prompt reuses at most the chunks that end before
 *       its last token, since the engine computes that one for the first output's logits (as vLLM does), so a cached
 *       block is never written again.</li>
 *   <li><b>Sharing</b>: a request that reuses a chunk holds it ({@link Hold}) until it ends; a held chunk is never
 *       evicted. Two requests computing the same chunk at once each use their own blocks; the first to finish gives
 *       them to the cache, the other frees its own.</li>
 *   <li><b>Eviction</b>: when the allocator has too few free blocks, the least recently used chunks no request holds
 *       go first. A request touches its chunks last to first, so a prompt's deeper chunks leave before the ones it
 *       starts with.</li>
 *   <li><b>Events</b>, when a listener is given: {@link KvEvent.Stored} for each chunk cached and
 *       {@link KvEvent.Removed} ({@link RemovalReason#EVICTED}) for each evicted, with the medium {@value #MEDIUM}
 *       (the engine's own memory, as vLLM names it), numbered by this cache's own epoch and sequence.</li>
 * </ul>
 * Thread-safe: one lock guards the index, the reference counts and the allocations made through it.
 */
final class PrefixCache {
    private static final Logger LOG = LoggerFactory.getLogger(PrefixCache.class);
    /** The medium of this cache's events: the engine's own host memory, not a store URI. */
    static final String MEDIUM = "CPU";

    /** The chunks one request reuses: their hashes and blocks, in prompt order. */
    record Hold(String[] hashes, int[] blocks, int tokens) {
        static final Hold NONE = new Hold(new String[0], new int[0], 0);
    }

    /** A cached chunk: its blocks, its parent's hash (the root's for a first chunk) and the requests holding it. */
    private static final class Entry {
        final int[] blocks;
        final String parent;
        int holders;

        Entry(int[] blocks, String parent) {
            this.blocks = blocks;
            this.parent = parent;
        }
    }

    private final BlockAllocator allocator;
    private final int chunkTokens;
    private final int blocksPerChunk;
    private final byte[] root;
    private final String rootHex;
    private final int layers;
    private final KvEventListener events;
    private final String instance;
    private final long epoch = (System.currentTimeMillis() << 12) | ThreadLocalRandom.current().nextInt(1 << 12);
    /** Access order: the eldest entry was used least recently. */
    private final LinkedHashMap<String, Entry> chunks = new LinkedHashMap<>(64, 0.75f, true);
    private long sequence;
    private long hitTokens;
    private long storedChunks;
    private long evictedChunks;

    /**
     * @param allocator   the engine's blocks; the cache frees into it what it evicts
     * @param chunkTokens tokens per chunk, a positive multiple of {@code blockSize}
     * @param blockSize   tokens per block of the paged cache
     * @param root        the 32-byte seed of the hash chains ({@link KvcV1KeyScheme#rootHash})
     * @param layers      the model's layers, reported in stored events
     * @param events      where stored and evicted chunks are reported, or null
     * @param instance    the engine's name in its events
     */
    PrefixCache(BlockAllocator allocator, int chunkTokens, int blockSize, byte[] root, int layers,
                KvEventListener events, String instance) {
        checkChunk(chunkTokens, blockSize);
        this.allocator = allocator;
        this.chunkTokens = chunkTokens;
        this.blocksPerChunk = chunkTokens / blockSize;
        this.root = root.clone();
        this.rootHex = HexFormat.of().formatHex(root);
        this.layers = layers;
        this.events = events;
        this.instance = instance;
    }

    /**
     * Checks that a chunk is whole blocks, so a cached chunk is a run of blocks no other chunk shares.
     *
     * @throws KVException {@code INVALID_CONFIG} naming the sizes when it is not
     */
    static void checkChunk(int chunkTokens, int blockSize) {
        if (chunkTokens < blockSize || chunkTokens % blockSize != 0) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "the prefix cache's chunk of " + chunkTokens
                    + " tokens is not a whole number of " + blockSize + "-token blocks")
                    .hint("use a chunk size of " + blockSize + ", " + 2 * blockSize + ", ...").build();
        }
    }

    /**
     * Holds the longest run of cached chunks that {@code prompt} starts with, among those ending before its last
     * token. Give it back with {@link #finish} or {@link #release}.
     */
    synchronized Hold acquire(int[] prompt) {
        ChunkKeys[] keys = fullChunks(prompt, prompt.length - 1);
        int n = 0;
        while (n < keys.length && chunks.containsKey(keys[n].hashHex())) {
            n++;
        }
        if (n == 0) {
            return Hold.NONE;
        }
        String[] hashes = new String[n];
        int[] blocks = new int[n * blocksPerChunk];
        for (int c = n - 1; c >= 0; c--) {
            hashes[c] = keys[c].hashHex();
            Entry e = chunks.get(hashes[c]);
            e.holders++;
            System.arraycopy(e.blocks, 0, blocks, c * blocksPerChunk, blocksPerChunk);
        }
        hitTokens += (long) n * chunkTokens;
        return new Hold(hashes, blocks, n * chunkTokens);
    }

    /**
     * Takes {@code n} blocks, evicting the least recently used chunks no request holds while too few are free.
     *
     * @throws KVException {@code BUSY} when, with everything evictable evicted, fewer than {@code n} are free
     */
    synchronized int[] allocate(int n) {
        Iterator<Map.Entry<String, Entry>> it = chunks.entrySet().iterator();
        while (allocator.freeBlocks() < n && it.hasNext()) {
            Map.Entry<String, Entry> e = it.next();
            if (e.getValue().holders == 0) {
                it.remove();
                allocator.free(e.getValue().blocks);
                evictedChunks++;
                emit(new KvEvent.Removed(epoch, sequence++, instance, MEDIUM, e.getKey(), RemovalReason.EVICTED));
            }
        }
        return allocator.allocate(n);
    }

    /**
     * Ends a request that completed: caches the full chunks of {@code tokens[0..written)} it computed, not cached
     * yet, by taking over their blocks from {@code own}; frees the rest of {@code own}; lets go of {@code hold}.
     *
     * @param hold    what {@link #acquire} gave the request
     * @param tokens  the prompt followed by the generated tokens
     * @param written tokens whose KV the request wrote or reused: the prompt and every generated token but the last
     * @param own     the blocks the request allocated, which follow {@code hold}'s in its block table
     */
    synchronized void finish(Hold hold, int[] tokens, int written, int[] own) {
        ChunkKeys[] keys = fullChunks(tokens, written);
        int first = hold.hashes().length;
        boolean[] adopted = new boolean[own.length];
        for (int c = first; c < keys.length; c++) {
            String hash = keys[c].hashHex();
            if (chunks.containsKey(hash)) {
                continue;
            }
            int from = (c - first) * blocksPerChunk;
            String parent = c == 0 ? rootHex : keys[c - 1].hashHex();
            chunks.put(hash, new Entry(Arrays.copyOfRange(own, from, from + blocksPerChunk), parent));
            Arrays.fill(adopted, from, from + blocksPerChunk, true);
            storedChunks++;
            emit(new KvEvent.Stored(epoch, sequence++, instance, MEDIUM, KvcV1KeyScheme.NAME, hash, parent,
                    chunkTokens, layers));
        }
        int kept = 0;
        for (boolean a : adopted) {
            kept += a ? 1 : 0;
        }
        int[] free = new int[own.length - kept];
        for (int i = 0, k = 0; i < own.length; i++) {
            if (!adopted[i]) {
                free[k++] = own[i];
            }
        }
        allocator.free(free);
        // Last to first, so that the chunks a prompt starts with are the most recently used.
        for (int c = keys.length - 1; c >= 0; c--) {
            chunks.get(keys[c].hashHex());
        }
        unhold(hold);
    }

    /** Lets go of {@code hold} after a request that failed, and frees its own blocks; nothing is cached. */
    synchronized void release(Hold hold, int[] own) {
        allocator.free(own);
        unhold(hold);
    }

    private void unhold(Hold hold) {
        for (String h : hold.hashes()) {
            Entry e = chunks.get(h);
            e.holders--;
        }
    }

    /** The chunk keys of the full chunks of {@code tokens[0..count)}. */
    private ChunkKeys[] fullChunks(int[] tokens, int count) {
        int full = count / chunkTokens;
        if (full == 0) {
            return new ChunkKeys[0];
        }
        List<ChunkKeys> planned = KvcV1KeyScheme.planFromRoot(root, chunkTokens, 0,
                RequestTokens.of(Arrays.copyOf(tokens, full * chunkTokens))).chunks();
        return planned.toArray(new ChunkKeys[0]);
    }

    private void emit(KvEvent event) {
        if (events == null) {
            return;
        }
        try {
            events.onEvent(event);
        } catch (RuntimeException e) {
            LOG.warn("the prefix cache's KV event listener failed on {}; the cache goes on: {}", event, e.toString());
        }
    }

    /** What the cache holds and has done. */
    synchronized PrefixCacheStats stats() {
        long held = 0;
        for (Entry e : chunks.values()) {
            held += e.holders > 0 ? 1 : 0;
        }
        return new PrefixCacheStats(chunkTokens, chunks.size(), (long) chunks.size() * blocksPerChunk, held,
                hitTokens, storedChunks, evictedChunks);
    }
}
