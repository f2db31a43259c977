package dev.kvconnector.lmcache.connector;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.format.LmChunkCodec;
import dev.kvconnector.lmcache.format.LmChunkFormat;
import dev.kvconnector.lmcache.key.LmcacheV0KeyScheme;
import dev.kvconnector.lmcache.key.LmcacheV1KeyScheme;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.util.LinkedHashMap;
import java.util.Objects;
import java.util.SequencedMap;

/**
 * The one connector ({@link StoreConnector}) configured for LMCache chunk objects, so that kvconnector engines and
 * LMCache instances reuse each other's prefixes through one store: it pairs the LMCache key scheme of the format
 * ({@link LmcacheV1KeyScheme} for {@code V1_KV_2LTD}/{@code V1_KV_MLA}, {@link LmcacheV0KeyScheme} for the 2024
 * {@code vllm}/{@code huggingface}) with its {@link LmChunkCodec}, retains entries after a drop-select, and skips
 * chunks already present on insert, as LMCache does.
 *
 * <pre>{@code
 * try (StoreConnector lm = LmCacheConnectors.builder(store, layout).modelId("meta-llama/Llama-3.1-8B").build()) {
 *     try (InsertSession s = lm.beginInsert(prompt)) {
 *         s.putLayers(LayerSource.paged(pagedCache, blockTable));   // stores the chunks not yet present
 *         s.commit();
 *     }
 *     int cached = lm.lookup(otherPrompt);                            // tokens of the longest prefix of whole chunks
 *     DropResult r = lm.dropSelect(otherPrompt, DropTarget.paged(myCache, myBlockTable));
 * }
 * }</pre>
 *
 * <p>Stores: {@code lmcache+lm://} (an LMCache server; over protocol v1 the RemoteMetadata travels in the request
 * header, as LMCache's lm connector sends it), {@code lmcache+valkey://}, {@code lmcache+mooncake://}, and any plain
 * store ({@code memory:}, {@code valkey://}) that holds the object as it is. A plain {@code lm://} store takes the
 * 2024 formats; for v1 formats it is refused, since it would store the metadata inside the object where LMCache
 * clients do not expect it.
 */
public final class LmCacheConnectors {
    /** Staging held at most, in bytes, unless the builder says otherwise. */
    public static final long DEFAULT_STAGING_BYTES = 1L << 30;

    private LmCacheConnectors() {
    }

    /** A builder for a connector over {@code store} (the caller closes it) for KV of {@code layout} (this rank's). */
    public static Builder builder(KVStore store, KVLayout layout) {
        return new Builder(store, layout);
    }

    /** The key scheme of {@code format}: v1 keys with {@code tags}, or the 2024 keys (which have no tags). */
    public static KeyScheme keyScheme(LmChunkFormat format, boolean saveUnfullChunk,
                                      SequencedMap<String, String> tags) {
        return switch (format) {
            case V1_KV_2LTD, V1_KV_MLA -> new LmcacheV1KeyScheme(saveUnfullChunk, tags);
            case V0_VLLM -> new LmcacheV0KeyScheme(LmcacheV0KeyScheme.FMT_VLLM, saveUnfullChunk);
            case V0_HUGGINGFACE -> new LmcacheV0KeyScheme(LmcacheV0KeyScheme.FMT_HUGGINGFACE, saveUnfullChunk);
        };
    }

    /** Configures the connector; {@link #modelId} is required. */
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
        private int ioThreads = -1;
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

        /** Whether an insert skips chunks already present when it begins; default true. */
        public Builder skipExisting(boolean skip) {
            this.skipExisting = skip;
            return this;
        }

        /** The most staging memory held, in bytes; default 1 GiB. */
        public Builder stagingBytes(long bytes) {
            this.stagingBytes = bytes;
            return this;
        }

        /** Threads that put chunk objects; see {@link StoreConnector.Builder#ioThreads}. */
        public Builder ioThreads(int n) {
            this.ioThreads = n;
            return this;
        }

        /** Adds a v1 key tag {@code @name%value}. */
        public Builder tag(String name, String value) {
            this.tags.put(name, value);
            return this;
        }

        /** The key scheme the connector will use: the format's, with the partial-chunk rule and tags set so far. */
        public KeyScheme keyScheme() {
            return LmCacheConnectors.keyScheme(format != null ? format : LmChunkCodec.defaultFormat(layout),
                    saveUnfullChunk, tags);
        }

        /**
         * Builds the connector.
         *
         * @throws KVException {@code INVALID_ARGUMENT} for a missing or {@code @}-holding model name, a format that
         *                     does not fit the layout or the store (2024 formats over the {@code lmcache+} layouts,
         *                     v1 formats over a plain {@code lm://}), tags on 2024 keys, or {@link DropMode#CONSUME}
         *                     over a store without {@link StoreCapability#REMOVE} (an LMCache server)
         */
        public StoreConnector build() {
            if (modelId == null || modelId.isEmpty() || modelId.indexOf('@') >= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "model name '" + modelId + "' is empty or holds '@',"
                                + " which LMCache keys use as their field separator")
                        .hint("serve the model under a name without '@'").build();
            }
            LmChunkFormat f = format != null ? format : LmChunkCodec.defaultFormat(layout);
            LmChunkCodec codec = LmChunkCodec.of(f);
            boolean v1 = codec.metadataBytes() > 0;
            String scheme = StoreUri.parse(store.uri()).scheme();
            if (dropMode == DropMode.CONSUME && !store.capabilities().contains(StoreCapability.REMOVE)) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "DropMode.CONSUME needs remove, and " + store.uri()
                        + " has none (an LMCache server's protocol has no delete)").store(store.uri())
                        .hint("use DropMode.RETAIN over " + scheme + "://").build();
            }
            if (!tags.isEmpty() && !v1) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "2024 keys (format " + f + ") have no tags").build();
            }
            codec.requireFits(layout);
            return StoreConnector.builder(store, layout).keyScheme(keyScheme()).codec(codec)
                    .modelId(modelId).tensorParallel(workerId, worldSize).chunkTokens(chunkTokens).dropMode(dropMode)
                    .ttlMillis(ttlMillis).skipExisting(skipExisting).stagingBytes(stagingBytes).ioThreads(ioThreads)
                    .checksums(false).build();
        }
    }
}
