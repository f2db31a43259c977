package dev.kvconnector.lmcache.connector;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.LmcacheV0KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.client.LmStore;
import dev.kvconnector.lmcache.format.LmChunkFormat;
import dev.kvconnector.lmcache.format.LmChunkGeometry;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.lmcache.key.LmcacheV1Keys;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.store.LmMooncakeLayoutStore;
import dev.kvconnector.lmcache.store.LmValkeyLayoutStore;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.paged.TokenSlots;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Objects;
import java.util.SequencedMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A connector that stores a request's KV as LMCache chunk objects, so that kvconnector engines and LMCache
 * instances reuse each other's prefixes through one store.
 *
 * <p>For a request it cuts the tokens into chunks of {@code chunkTokens} (256 by default; the trailing partial
 * chunk is kept with {@code saveUnfullChunk}, LMCache's {@code save_unfull_chunk}), keys each chunk as LMCache
 * does, and stores one object per chunk holding every layer:
 * <table>
 *   <caption>formats</caption>
 *   <tr><th>format</th><th>key</th><th>object</th></tr>
 *   <tr><td>{@link LmChunkFormat#V1_KV_2LTD} (MHA default), {@link LmChunkFormat#V1_KV_MLA} (MLA default)</td>
 *       <td>v1: {@code model@ws@wid@hash@dtype[@tag%value]}</td>
 *       <td>RemoteMetadata (28 bytes: length, fmt, dtype, shape) then the KV bytes; over {@code lm://} protocol
 *       v1 the metadata travels in the request header instead, as LMCache's lm connector sends it</td></tr>
 *   <tr><td>{@link LmChunkFormat#V0_VLLM}, {@link LmChunkFormat#V0_HUGGINGFACE}</td>
 *       <td>2024: {@code fmt@model@ws@wid@hash}</td><td>the raw KV bytes (the 2024 {@code fast} encoding)</td></tr>
 * </table>
 * Chunk hashes are the documented chained SHA-256 of {@link LmcacheV0KeyScheme} (LMCache v1's default, Python's
 * {@code hash()}, is not reproducible outside its process), or the engine's own hashes
 * ({@link RequestTokens#ofChunkHashes}; v1 keys need them in lower-case hex).
 *
 * <p>Any store works: {@code lm://}, {@code lmcache+valkey://}, {@code lmcache+mooncake://}, {@code memory:}.
 *
 * <pre>{@code
 * try (LmCacheConnector lm = LmCacheConnector.builder(store, layout).modelId("meta-llama/Llama-3.1-8B").build()) {
 *     lm.insert(prompt, pagedCache, blockTable);              // stores the chunks not yet present
 *     int cached = lm.lookup(otherPrompt);                     // tokens of the longest prefix of whole chunks
 *     DropResult r = lm.dropSelect(otherPrompt, myCache, myBlockTable);
 * }
 * }</pre>
 *
 * <p><b>Reads never load garbage.</b> Every object read is checked against the chunk this connector expects
 * (size, and for v1 the metadata's format, dtype and shape) before a byte reaches the paged cache. A mismatch in
 * the first chunk is a {@link MissReason#LAYOUT_MISMATCH} miss (an unreadable header {@link MissReason#CORRUPT});
 * in a later chunk it ends the prefix there, with a warning that names the key.
 *
 * <p>Entries are retained for reuse ({@link DropMode#RETAIN}) by default; {@link DropMode#CONSUME} removes the
 * loaded chunks and is refused for {@code lm://}, whose protocol has no delete. Staging is pooled: one pooled
 * segment per chunk in flight, no arena per transfer, no {@code byte[]}. Thread-safe; the caller owns the store.
 */
public final class LmCacheConnector implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LmCacheConnector.class);
    /** Staging held at most, in bytes, unless the builder says otherwise. */
    public static final long DEFAULT_STAGING_BYTES = 1L << 30;

    private final KVStore store;
    private final LmStore lmServerV1;
    private final KVLayout layout;
    private final LmChunkFormat format;
    private final KeyContext context;
    private final LmcacheV0KeyScheme chunker;
    private final SequencedMap<String, String> tags;
    private final DropMode dropMode;
    private final PutOptions putOptions;
    private final boolean skipExisting;
    private final int metadataBytes;
    private final int dtypeCode;
    private final SegmentPool staging;

    private LmCacheConnector(Builder b) {
        this.store = b.store;
        this.layout = b.layout;
        this.format = b.format != null ? b.format
                : b.layout.kind() == AttentionKind.MLA ? LmChunkFormat.V1_KV_MLA : LmChunkFormat.V1_KV_2LTD;
        this.context = new KeyContext(b.modelId, b.layout, b.workerId, b.worldSize, b.chunkTokens);
        boolean v1 = format.memoryFormat() > 0;
        this.chunker = new LmcacheV0KeyScheme(format == LmChunkFormat.V0_HUGGINGFACE
                ? LmcacheV0KeyScheme.FMT_HUGGINGFACE : LmcacheV0KeyScheme.FMT_VLLM, b.saveUnfullChunk);
        this.tags = Collections.unmodifiableSequencedMap(new LinkedHashMap<>(b.tags));
        this.dropMode = b.dropMode;
        this.putOptions = PutOptions.DEFAULT.withTtlMillis(b.ttlMillis);
        this.skipExisting = b.skipExisting;
        this.lmServerV1 = v1 && store instanceof LmStore lm && lm.protocol() == LmProtocolVersion.V1 ? lm : null;
        this.metadataBytes = v1 && lmServerV1 == null ? LmRemoteMetadata.SINGLE_GROUP_BYTES : 0;
        this.dtypeCode = v1 ? LmRemoteMetadata.dtypeCode(layout.dtype()) : 0;
        if (v1) {
            LmcacheV1Keys.dtypeName(layout.dtype());
        }
        this.staging = new SegmentPool(b.stagingBytes);
    }

    /** A builder for a connector over {@code store} for KV of {@code layout} (this rank's). */
    public static Builder builder(KVStore store, KVLayout layout) {
        return new Builder(store, layout);
    }

    /** The chunk format. */
    public LmChunkFormat format() {
        return format;
    }

    /**
     * The keys of the request's chunks, in token order, and the tokens each covers.
     *
     * @throws KVException {@code INVALID_ARGUMENT} for a model name with {@code @}, a namespace (LMCache keys have
     *                     none), or engine hashes that are not lower-case hex (v1)
     */
    public List<ChunkKey> keys(RequestTokens prompt) {
        KeyPlan plan = chunker.plan(context, prompt);
        List<ChunkKey> keys = new ArrayList<>(plan.chunks().size());
        for (ChunkKeys c : plan.chunks()) {
            String key = format.memoryFormat() > 0
                    ? LmcacheV1Keys.chunkKey(context.modelId(), context.worldSize(), context.tpRank(), c.hashHex(),
                    layout.dtype(), tags)
                    : c.layerKeys()[0];
            keys.add(new ChunkKey(key, c.startToken(), c.endToken()));
        }
        return keys;
    }

    /**
     * One chunk's key and tokens.
     *
     * @param key        the store key
     * @param startToken the first token (inclusive)
     * @param endToken   the end (exclusive)
     */
    public record ChunkKey(String key, int startToken, int endToken) {
        /** Tokens in the chunk. */
        public int tokens() {
            return endToken - startToken;
        }
    }

    /** Tokens of the longest prefix of whole chunks present in the store: it asks chunk by chunk, and stops at the first absent one. */
    public int lookup(RequestTokens prompt) {
        int matched = 0;
        for (ChunkKey c : keys(prompt)) {
            if (!store.exists(c.key())) {
                break;
            }
            matched = c.endToken();
        }
        return matched;
    }

    /**
     * Stores the request's chunks, gathered from {@code cache} at {@code slots}, as LMCache chunk objects. Chunks
     * already present are skipped (LMCache's store does the same), unless the builder turned that off.
     *
     * @return the number of chunks written
     * @throws KVException {@code SHAPE_MISMATCH} when the cache's layout is not this connector's or the slots
     *                     cover fewer tokens than the chunks; store failures as the store reports them (a server
     *                     refusing the put: {@code STORE_FULL}), naming the key
     */
    public int insert(RequestTokens prompt, PagedKVCache cache, TokenSlots slots) {
        List<ChunkKey> chunks = keys(prompt);
        checkCache(cache, slots, chunks.isEmpty() ? 0 : chunks.getLast().endToken(), "insert");
        int written = 0;
        for (ChunkKey c : chunks) {
            if (skipExisting && store.exists(c.key())) {
                continue;
            }
            putChunk(c, cache, slots);
            written++;
        }
        return written;
    }

    /**
     * Loads the longest prefix of whole chunks present into {@code cache} at {@code slots}. Each chunk is read into
     * pooled staging, checked against the expected layout, then scattered.
     *
     * @return a hit of the tokens loaded, or a miss: {@code ABSENT}, {@code LAYOUT_MISMATCH} or {@code CORRUPT} for
     *         the first chunk
     */
    public DropResult dropSelect(RequestTokens prompt, PagedKVCache cache, TokenSlots slots) {
        List<ChunkKey> chunks = keys(prompt);
        int requested = prompt.totalTokens();
        if (chunks.isEmpty()) {
            return DropResult.miss(requested, MissReason.ABSENT, "the request has no whole chunk of "
                    + context.chunkTokens() + " tokens (save_unfull_chunk is off)");
        }
        checkCache(cache, slots, chunks.getFirst().endToken(), "dropSelect");
        int loaded = 0;
        int matched = 0;
        for (ChunkKey c : chunks) {
            if (c.endToken() > slots.tokens()) {
                break;
            }
            Outcome o = loadChunk(c, cache, slots);
            if (o.reason() != null) {
                if (loaded == 0) {
                    return DropResult.miss(requested, o.reason(), o.detail());
                }
                if (o.reason() != MissReason.ABSENT) {
                    LOG.warn("LMCache chunk {} of tokens [{}, {}) not loaded, the prefix ends before it: {}",
                            c.key(), c.startToken(), c.endToken(), o.detail());
                }
                break;
            }
            loaded++;
            matched = c.endToken();
        }
        if (dropMode == DropMode.CONSUME && loaded > 0) {
            String[] remove = new String[loaded];
            for (int i = 0; i < loaded; i++) {
                remove[i] = chunks.get(i).key();
            }
            store.removeConsumed(remove, loaded);
        }
        return DropResult.hit(matched, requested);
    }

    /** Frees the staging memory. The store stays open: the caller owns it. */
    @Override
    public void close() {
        staging.close();
    }

    private LmChunkGeometry geometry(ChunkKey c) {
        return new LmChunkGeometry(layout.numLayers(), c.tokens(), layout.kvHeads(), layout.headSize(),
                layout.dtype().byteWidth());
    }

    /** The RemoteMetadata of a chunk of this geometry, as LMCache writes it. */
    private LmRemoteMetadata expectedMetadata(LmChunkGeometry g) {
        long[] shape = format.shape(g);
        long bytes = format.chunkBytes(g);
        for (long d : shape) {
            if (d > Integer.MAX_VALUE) {
                throw KVException.of(ErrorCode.SHAPE_MISMATCH, "chunk dimension " + d + " does not fit LMCache's "
                        + "int32 metadata").build();
            }
        }
        if (bytes > Integer.MAX_VALUE) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "a chunk of " + bytes + " bytes does not fit LMCache's "
                    + "int32 length; use fewer chunk tokens").build();
        }
        return LmRemoteMetadata.of((int) bytes, format.memoryFormat(), dtypeCode, (int) shape[0], (int) shape[1],
                (int) shape[2], (int) shape[3]);
    }

    private void putChunk(ChunkKey c, PagedKVCache cache, TokenSlots slots) {
        LmChunkGeometry g = geometry(c);
        long bytes = format.chunkBytes(g);
        LmRemoteMetadata meta = format.memoryFormat() > 0 ? expectedMetadata(g) : null;
        MemorySegment s = staging.acquire(metadataBytes + bytes);
        try {
            MemorySegment chunk = s.asSlice(metadataBytes, bytes);
            gather(cache, slots, c, g, chunk);
            if (lmServerV1 != null) {
                LmRemoteMetadata.Group m = meta.groups().getFirst();
                lmServerV1.put(c.key(), chunk, new LmObjectMeta(meta.fmt(), m.dtype(), m.shape0(), m.shape1(),
                        m.shape2(), m.shape3()));
                return;
            }
            if (metadataBytes > 0) {
                meta.encode(s, 0);
            }
            store.put(c.key(), s.asSlice(0, metadataBytes + bytes), putOptions);
        } finally {
            staging.release(s);
        }
    }

    private void gather(PagedKVCache cache, TokenSlots slots, ChunkKey c, LmChunkGeometry g, MemorySegment chunk) {
        int tensors = format.tensorsPerLayer();
        if (format.tokenMajor()) {
            for (int l = 0; l < g.layers(); l++) {
                for (int t = 0; t < tensors; t++) {
                    cache.gather(l, t, slots, c.startToken(), c.endToken(), chunk, format.blockOffset(g, l, t));
                }
            }
            return;
        }
        MemorySegment temp = staging.acquire(format.chunkBytes(g));
        try {
            MemorySegment[][] kv = perLayerViews(temp, g);
            for (int l = 0; l < g.layers(); l++) {
                for (int t = 0; t < tensors; t++) {
                    cache.gather(l, t, slots, c.startToken(), c.endToken(), kv[t][l], 0);
                }
            }
            format.pack(kv[0], kv[1], 0, g, chunk);
        } finally {
            staging.release(temp);
        }
    }

    private void scatter(MemorySegment chunk, LmChunkGeometry g, ChunkKey c, PagedKVCache cache, TokenSlots slots) {
        int tensors = format.tensorsPerLayer();
        if (format.tokenMajor()) {
            for (int l = 0; l < g.layers(); l++) {
                for (int t = 0; t < tensors; t++) {
                    cache.scatter(chunk, format.blockOffset(g, l, t), l, t, slots, c.startToken(), c.endToken());
                }
            }
            return;
        }
        MemorySegment temp = staging.acquire(format.chunkBytes(g));
        try {
            MemorySegment[][] kv = perLayerViews(temp, g);
            format.unpack(chunk, g, kv[0], kv[1], 0);
            for (int l = 0; l < g.layers(); l++) {
                for (int t = 0; t < tensors; t++) {
                    cache.scatter(kv[t][l], 0, l, t, slots, c.startToken(), c.endToken());
                }
            }
        } finally {
            staging.release(temp);
        }
    }

    /** K and V views {@code [T, H, D]} of each layer inside one temporary segment (head-major formats only). */
    private static MemorySegment[][] perLayerViews(MemorySegment temp, LmChunkGeometry g) {
        MemorySegment[][] kv = new MemorySegment[2][g.layers()];
        long tb = g.tensorBytes();
        for (int l = 0; l < g.layers(); l++) {
            kv[0][l] = temp.asSlice(2L * l * tb, tb);
            kv[1][l] = temp.asSlice((2L * l + 1) * tb, tb);
        }
        return kv;
    }

    /** A chunk's read result: a null reason when it was loaded. */
    private record Outcome(MissReason reason, String detail) {
        static final Outcome LOADED = new Outcome(null, null);
    }

    private Outcome loadChunk(ChunkKey c, PagedKVCache cache, TokenSlots slots) {
        LmChunkGeometry g = geometry(c);
        long bytes = format.chunkBytes(g);
        long objectBytes = metadataBytes + bytes;
        MemorySegment s = staging.acquire(objectBytes);
        try {
            Outcome o = read(c, g, s.asSlice(0, objectBytes), bytes);
            if (o == Outcome.LOADED) {
                scatter(s.asSlice(metadataBytes, bytes), g, c, cache, slots);
            }
            return o;
        } finally {
            staging.release(s);
        }
    }

    private Outcome read(ChunkKey c, LmChunkGeometry g, MemorySegment object, long bytes) {
        long r;
        LmReplyHeader reply = null;
        try {
            if (lmServerV1 != null) {
                reply = new LmReplyHeader();
                r = lmServerV1.getInto(c.key(), object, reply);
            } else {
                r = store.getInto(c.key(), object);
            }
        } catch (KVException e) {
            if (e.code() == ErrorCode.CORRUPT_OBJECT) {
                return new Outcome(MissReason.CORRUPT, e.getMessage());
            }
            throw e;
        }
        if (GetResult.isMiss(r)) {
            return new Outcome(MissReason.ABSENT, "no chunk under key " + c.key() + " (tokens [" + c.startToken()
                    + ", " + c.endToken() + "))");
        }
        long found = GetResult.isTooSmall(r) ? GetResult.requiredSize(r) : r;
        if (found != object.byteSize()) {
            return mismatch(c, "the object holds " + found + " bytes; a " + format + " chunk of " + g + " is "
                    + object.byteSize() + " bytes" + (metadataBytes > 0 ? " with its " + metadataBytes
                    + "-byte metadata" : ""));
        }
        if (format.memoryFormat() < 0) {
            return Outcome.LOADED;
        }
        LmRemoteMetadata expected = expectedMetadata(g);
        LmRemoteMetadata got;
        if (reply != null) {
            LmObjectMeta m = reply.meta();
            got = LmRemoteMetadata.of(reply.length(), m.fmt(), m.dtype(), m.shape0(), m.shape1(), m.shape2(),
                    m.shape3());
        } else {
            try {
                got = LmRemoteMetadata.decode(object, 0, 1);
            } catch (KVException e) {
                return new Outcome(MissReason.CORRUPT, "key " + c.key() + ": " + e.getMessage());
            }
        }
        if (!sameLayout(expected, got)) {
            return mismatch(c, "the object's metadata is " + got + ", this connector expects " + expected);
        }
        return Outcome.LOADED;
    }

    private Outcome mismatch(ChunkKey c, String detail) {
        return new Outcome(MissReason.LAYOUT_MISMATCH, "key " + c.key() + " (tokens [" + c.startToken() + ", "
                + c.endToken() + ")): " + detail + ". Another writer used this model name with a different layout "
                + "(heads, layers, head size, TP split or format)");
    }

    /** Equal, except that dtype numbers 1 and 2 both mean float16 in LMCache. */
    private static boolean sameLayout(LmRemoteMetadata a, LmRemoteMetadata b) {
        if (a.length() != b.length() || a.fmt() != b.fmt()) {
            return false;
        }
        LmRemoteMetadata.Group x = a.groups().getFirst();
        LmRemoteMetadata.Group y = b.groups().getFirst();
        return Objects.equals(LmRemoteMetadata.dtypeOfCode(x.dtype()), LmRemoteMetadata.dtypeOfCode(y.dtype()))
                && x.shape0() == y.shape0() && x.shape1() == y.shape1() && x.shape2() == y.shape2()
                && x.shape3() == y.shape3();
    }

    private void checkCache(PagedKVCache cache, TokenSlots slots, int tokens, String op) {
        if (!cache.layout().canonicalString().equals(layout.canonicalString())) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "paged cache layout " + cache.layout().canonicalString()
                    + " differs from the connector's " + layout.canonicalString()).operation(op).build();
        }
        if (slots.tokens() < tokens) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "slots cover " + slots.tokens() + " tokens; the chunks "
                    + "need " + tokens).operation(op).build();
        }
    }

    /** Configures a {@link LmCacheConnector}; {@link #modelId} is required. */
    public static final class Builder {
        private final KVStore store;
        private final KVLayout layout;
        private String modelId;
        private LmChunkFormat format;
        private int chunkTokens = KeyContext.DEFAULT_CHUNK_TOKENS;
        private boolean saveUnfullChunk = true;
        private int workerId;
        private int worldSize = 1;
        private DropMode dropMode = DropMode.RETAIN;
        private long ttlMillis;
        private boolean skipExisting = true;
        private long stagingBytes = DEFAULT_STAGING_BYTES;
        private final SequencedMap<String, String> tags = new LinkedHashMap<>();

        private Builder(KVStore store, KVLayout layout) {
            this.store = Objects.requireNonNull(store, "store");
            this.layout = Objects.requireNonNull(layout, "layout");
        }

        /** The served model's name, as LMCache keys carry it; must not contain {@code @}. */
        public Builder modelId(String name) {
            this.modelId = name;
            return this;
        }

        /** The chunk layout; default {@code V1_KV_2LTD} for MHA and {@code V1_KV_MLA} for MLA. */
        public Builder format(LmChunkFormat f) {
            this.format = f;
            return this;
        }

        /** Tokens per chunk (LMCache's {@code chunk_size}); default 256. */
        public Builder chunkTokens(int tokens) {
            this.chunkTokens = tokens;
            return this;
        }

        /** Whether the trailing partial chunk is stored (LMCache's {@code save_unfull_chunk}); default true. */
        public Builder saveUnfullChunk(boolean save) {
            this.saveUnfullChunk = save;
            return this;
        }

        /** This worker's rank and the tensor-parallel world size, as LMCache keys carry them; default 0 of 1. */
        public Builder rank(int worker, int world) {
            this.workerId = worker;
            this.worldSize = world;
            return this;
        }

        /** What a drop-select does with the chunks it loaded; default {@link DropMode#RETAIN}. */
        public Builder dropMode(DropMode mode) {
            this.dropMode = Objects.requireNonNull(mode, "mode");
            return this;
        }

        /** Time to live of stored chunks in milliseconds, for stores with TTLs; 0 (default) is the store's. */
        public Builder ttlMillis(long ttl) {
            this.ttlMillis = ttl;
            return this;
        }

        /** Whether insert skips chunks already present; default true. */
        public Builder skipExisting(boolean skip) {
            this.skipExisting = skip;
            return this;
        }

        /** The most staging memory held, in bytes; default 1 GiB. */
        public Builder stagingBytes(long bytes) {
            this.stagingBytes = bytes;
            return this;
        }

        /** Adds a v1 key tag {@code @name%value}. */
        public Builder tag(String name, String value) {
            this.tags.put(name, value);
            return this;
        }

        /**
         * Builds the connector.
         *
         * @throws KVException {@code INVALID_ARGUMENT} for a missing or {@code @}-holding model name, a format that
         *                     does not fit the layout or the store (2024 formats over the {@code lmcache+} v1
         *                     layouts), or {@link DropMode#CONSUME} over {@code lm://}
         */
        public LmCacheConnector build() {
            if (modelId == null || modelId.isEmpty() || modelId.indexOf('@') >= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "model name '" + modelId + "' is empty or holds '@',"
                                + " which LMCache keys use as their field separator")
                        .hint("serve the model under a name without '@'").build();
            }
            LmChunkFormat f = format != null ? format
                    : layout.kind() == AttentionKind.MLA ? LmChunkFormat.V1_KV_MLA : LmChunkFormat.V1_KV_2LTD;
            if ((f == LmChunkFormat.V1_KV_MLA) != (layout.kind() == AttentionKind.MLA)) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "format " + f + " does not fit a " + layout.kind()
                        + " layout").hint("use V1_KV_MLA for MLA layouts, and V1_KV_2LTD, V0_VLLM or V0_HUGGINGFACE "
                        + "for MHA").build();
            }
            if (dropMode == DropMode.CONSUME && store instanceof LmStore) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "DropMode.CONSUME needs remove, and the LMCache "
                        + "server protocol has none").store(store.uri()).hint("use DropMode.RETAIN over lm://")
                        .build();
            }
            if (f.memoryFormat() < 0 && (store instanceof LmValkeyLayoutStore || store instanceof LmMooncakeLayoutStore)) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "format " + f + " writes 2024 chunks without "
                        + "RemoteMetadata, and " + store.uri() + " holds LMCache v1 chunk objects")
                        .store(store.uri()).hint("use V1_KV_2LTD (or V1_KV_MLA) over lmcache+ stores, or the plain "
                                + "store URI for 2024 chunks").build();
            }
            if (!tags.isEmpty() && f.memoryFormat() < 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "2024 keys (format " + f + ") have no tags").build();
            }
            return new LmCacheConnector(this);
        }
    }
}
