package dev.kvconnector.connector;

import dev.kvconnector.cuda.CudaStaging;
import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.RegisteredMemory;
import dev.kvconnector.store.StoreCapability;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Moves a request's KV cache and hidden states between an engine and a {@link KVStore}, with vLLM's lookup-buffer
 * semantics done right: a producer inserts layer by layer and commits; a consumer looks up the longest committed
 * prefix and drop-selects it into its own cache, either after the commit or layer by layer while the producer is
 * still writing.
 *
 * <p>Objects, per chunk of the request (the default key scheme {@code kvc-v1}, 256-token chunks): one per layer
 * holding K and V (or the MLA latent) as {@code [tensors, T, kvHeads, headSize]} in kvconnector's raw format
 * (64-byte header with the layout fingerprint and a CRC32C), one for the hidden states, and a manifest written
 * last that makes the chunk visible. A miss is a {@link DropResult} with a {@link MissReason}; failures of the
 * store are {@link KVException}s.
 *
 * <p>Thread-safe: many sessions may run at once. Layer puts run on the connector's I/O threads so they overlap the
 * engine's compute; staging memory comes from a pool (no arena per transfer), registered once with stores that
 * support zero-copy registration.
 *
 * <p>Device-resident paged caches ({@link DevicePagedKVCache}) move through a {@link CudaStaging} opened on first
 * use for the cache's GPU (one GPU per connector, as one engine worker per GPU): K and V are gathered on the GPU,
 * then either copied into the host staging pool, which is then page-locked for DMA, and put (host stores), or put
 * straight from registered device buffers when the store declares {@link StoreCapability#DEVICE_MEMORY}
 * (GPUDirect). Without a driver, a GPU or the kernels, device caches fail with an error naming what is missing;
 * the host path never loads the driver.
 */
public final class KVStoreConnector implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KVStoreConnector.class);
    private final KVStore store;
    private final KVLayout layout;
    private final KeyScheme scheme;
    private final KeyContext keyContext;
    private final DropMode dropMode;
    private final PutOptions putOptions;
    private final boolean checksums;
    private final long layerTimeoutMillis;
    private final long fingerprint;
    private final SegmentPool staging;
    private final ThreadPoolExecutor io;
    private final boolean inlinePuts;
    private final RegisteredMemory registration;
    private final boolean deviceDirect;
    private final long stagingBytes;
    private final Object cudaLock = new Object();
    private volatile CudaStaging cuda;
    private final ConnectorMetrics metrics = new ConnectorMetrics();
    private volatile boolean closed;
    private volatile boolean warnedNoRemove;

    private KVStoreConnector(Builder b) {
        this.store = b.store;
        this.layout = b.layout;
        this.scheme = KeySchemes.byName(b.keyScheme);
        if (scheme.granularity() != Granularity.CHUNK_LAYER) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "key scheme " + scheme.name() + " stores " + scheme.granularity()
                    + " objects; the connector moves one object per chunk and layer")
                    .hint("use the default scheme " + KeySchemes.DEFAULT + "; " + scheme.name()
                            + " keys are for interop tools (kvctl key) until its layout lands in the connector").build();
        }
        this.keyContext = new KeyContext(b.modelId == null ? layout.name() : b.modelId, layout, b.tpRank, b.worldSize,
                b.chunkTokens);
        this.dropMode = b.dropMode;
        this.putOptions = PutOptions.DEFAULT.withTtlMillis(b.ttlMillis);
        this.checksums = b.checksums;
        this.layerTimeoutMillis = b.layerTimeoutMillis;
        this.fingerprint = layout.fingerprint();
        this.registration = store.capabilities().contains(StoreCapability.REGISTERED_MEMORY)
                && store instanceof RegisteredMemory r ? r : null;
        this.deviceDirect = registration != null && store.capabilities().contains(StoreCapability.DEVICE_MEMORY);
        this.stagingBytes = b.stagingBytes;
        this.staging = new SegmentPool(b.stagingBytes, this::onNewStagingSegment);
        this.inlinePuts = b.ioThreads == 0
                || (b.ioThreads < 0 && store.capabilities().contains(StoreCapability.LOCAL_MEMORY));
        int threads = b.ioThreads > 0 ? b.ioThreads : 2;
        AtomicInteger n = new AtomicInteger();
        this.io = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(4096), r -> {
                    Thread t = new Thread(r, "kvconnector-io-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                }, new ThreadPoolExecutor.CallerRunsPolicy());
    }

    /** Starts a builder for a connector over {@code store} with {@code layout}. */
    public static Builder builder(KVStore store, KVLayout layout) {
        return new Builder(store, layout);
    }

    /** Begins inserting a request's KV; nothing is visible to consumers until the session commits. */
    public InsertSession beginInsert(RequestTokens request) {
        return new InsertSession(this, geometry(request, "beginInsert"));
    }

    /** The longest committed prefix of the request, in tokens, at chunk granularity (0 when nothing is stored). */
    public int lookup(RequestTokens request) {
        ChunkGeometry geo = geometry(request, "lookup");
        int matched = 0;
        for (var c : geo.chunks) {
            if (!store.exists(c.manifestKey())) {
                break;
            }
            matched = c.endToken();
        }
        return matched;
    }

    /** Reads the longest committed prefix of the request into {@code target}, with the connector's drop mode. */
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        return dropSelect(request, target, dropMode);
    }

    /** Reads the longest committed prefix of the request into {@code target}, then consumes or retains it. */
    public DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode) {
        DropSession s = newDrop(request, target, mode, false);
        s.run();
        return s.result();
    }

    /**
     * Starts a layer-wise drop-select that may begin before the producer commits: each layer is loaded as soon as
     * it is stored, waiting at most the connector's layer timeout overall.
     */
    public DropSession beginDropSelect(RequestTokens request, DropTarget target) {
        DropSession s = newDrop(request, target, dropMode, true);
        execute(s::run);
        return s;
    }

    private DropSession newDrop(RequestTokens request, DropTarget target, DropMode mode, boolean streaming) {
        ChunkGeometry geo = geometry(request, "dropSelect");
        target.validate(layout, geo.plan.totalTokens());
        return new DropSession(this, geo, target, mode, streaming, layerTimeoutMillis * 1_000_000L,
                request.totalTokens());
    }

    private ChunkGeometry geometry(RequestTokens request, String op) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the connector is closed").store(store.uri()).operation(op).build();
        }
        KeyPlan plan = scheme.plan(keyContext, request);
        return new ChunkGeometry(plan, layout);
    }

    /** Per-layer latency, bytes, hits and misses so far. */
    public ConnectorMetrics.Snapshot metrics() {
        return metrics.snapshot();
    }

    /** Zeroes every metric, for example after a warm-up or at the start of a reporting interval. */
    public void resetMetrics() {
        metrics.reset();
    }

    /** The store. */
    public KVStore store() {
        return store;
    }

    /** The layout. */
    public KVLayout layout() {
        return layout;
    }

    /** The key context (model, layout, rank, chunk size). */
    public KeyContext keyContext() {
        return keyContext;
    }

    private void onNewStagingSegment(MemorySegment segment) {
        if (registration != null) {
            registration.register(segment);
        }
        CudaStaging c = cuda;
        if (c != null) {
            c.pinHost(segment);
        }
    }

    /**
     * The device staging for {@code cache}'s GPU, opened on first use: from then on every host staging segment is
     * page-locked, and with a {@link StoreCapability#DEVICE_MEMORY} store every device buffer is registered.
     *
     * @throws KVException naming the missing driver, device or kernels; or {@code INVALID_ARGUMENT} when the cache is
     *     on another GPU than this connector's earlier device caches
     */
    CudaStaging cuda(DevicePagedKVCache cache, String op) {
        CudaStaging c = cuda;
        if (c == null) {
            synchronized (cudaLock) {
                c = cuda;
                if (c == null) {
                    if (closed) {
                        throw KVException.of(ErrorCode.CLOSED, "the connector is closed").store(store.uri())
                                .operation(op).build();
                    }
                    c = deviceDirect
                            ? CudaStaging.open(cache.device(), stagingBytes, registration::register,
                                    registration::unregister)
                            : CudaStaging.open(cache.device(), stagingBytes, s -> { }, s -> { });
                    // Published before pinning what exists, so a segment allocated meanwhile is pinned by one side.
                    cuda = c;
                    for (MemorySegment s : staging.segments()) {
                        c.pinHost(s);
                    }
                }
            }
        }
        if (c.ordinal() != cache.device()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the paged cache is on cuda:" + cache.device()
                    + " but this connector already moves device KV of cuda:" + c.ordinal()).store(store.uri())
                    .operation(op).hint("use one connector per GPU, as one engine worker per GPU").build();
        }
        return c;
    }

    /** Returns a device staging buffer that a put held, once the put is done. */
    void releaseDeviceStaging(MemorySegment deviceLease) {
        cuda.release(deviceLease);
    }

    /** Whether device buffers go to the store directly (GPUDirect) rather than through host staging. */
    boolean deviceDirect() {
        return deviceDirect;
    }

    ConnectorMetrics metricsRecorder() {
        return metrics;
    }

    SegmentPool staging() {
        return staging;
    }

    PutOptions putOptions() {
        return putOptions;
    }

    boolean checksums() {
        return checksums;
    }

    long fingerprint() {
        return fingerprint;
    }

    long layerTimeoutMillis() {
        return layerTimeoutMillis;
    }

    /**
     * Removes keys; a store whose protocol has no delete (an LMCache server) keeps them until it evicts them, which
     * is logged once rather than failing a read that already succeeded. Unmanifested objects stay invisible.
     */
    void removeOrKeep(String[] keys, int count, String op, boolean consumed) {
        try {
            if (consumed) {
                store.removeConsumed(keys, count);
            } else {
                store.removeBatch(keys, count);
            }
        } catch (KVException e) {
            if (e.code() != ErrorCode.UNSUPPORTED) {
                throw e;
            }
            if (!warnedNoRemove) {
                warnedNoRemove = true;
                LOG.warn("{} cannot remove objects ({}); after {} they stay until the store evicts them. Use "
                        + "DropMode.RETAIN with this store", store.uri(), e.getMessage(), op);
            }
        }
    }

    void execute(Runnable task) {
        io.execute(task);
    }

    /** Runs a layer put: on the caller's thread for local-memory stores, otherwise on an I/O thread. */
    void executePut(Runnable put) {
        if (inlinePuts) {
            put.run();
        } else {
            io.execute(put);
        }
    }

    /**
     * Waits for in-flight transfers, releases staging memory and its registration. The store stays open: the
     * caller opened it and closes it.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        io.shutdown();
        try {
            if (!io.awaitTermination(layerTimeoutMillis + 30_000, TimeUnit.MILLISECONDS)) {
                io.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            io.shutdownNow();
        }
        if (registration != null) {
            for (MemorySegment s : staging.segments()) {
                registration.unregister(s);
            }
        }
        try {
            synchronized (cudaLock) {
                if (cuda != null) {
                    cuda.close();
                }
            }
        } finally {
            staging.close();
        }
    }

    /** Configures a {@link KVStoreConnector}. Every number has a default that suits one 8-GPU node. */
    public static final class Builder {
        private final KVStore store;
        private final KVLayout layout;
        private String modelId;
        private String keyScheme = KeySchemes.DEFAULT;
        private int tpRank;
        private int worldSize = 1;
        private int chunkTokens = KeyContext.DEFAULT_CHUNK_TOKENS;
        private DropMode dropMode = DropMode.CONSUME;
        private long ttlMillis;
        private boolean checksums = true;
        private long stagingBytes = 1L << 30;
        private int ioThreads = -1;
        private long layerTimeoutMillis = 10_000;

        private Builder(KVStore store, KVLayout layout) {
            if (store == null || layout == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a connector needs a store and a layout").build();
            }
            this.store = store;
            this.layout = layout;
        }

        /** The served model's id, bound into every key (default: the layout's name). */
        public Builder modelId(String id) {
            this.modelId = id;
            return this;
        }

        /** The key scheme by name (default {@code kvc-v1}). */
        public Builder keyScheme(String name) {
            this.keyScheme = name;
            return this;
        }

        /** This worker's tensor-parallel rank and size (default 0 of 1). */
        public Builder tensorParallel(int rank, int size) {
            this.tpRank = rank;
            this.worldSize = size;
            return this;
        }

        /** Tokens per chunk, the granularity of prefix matching (default 256). */
        public Builder chunkTokens(int tokens) {
            this.chunkTokens = tokens;
            return this;
        }

        /** Consume (default) or retain after a drop-select. */
        public Builder dropMode(DropMode mode) {
            this.dropMode = mode;
            return this;
        }

        /** Time to live of stored objects in ms; 0 (default) leaves it to the store. */
        public Builder ttlMillis(long ttl) {
            this.ttlMillis = ttl;
            return this;
        }

        /** Whether layer objects carry a CRC32C of their payload (default true). */
        public Builder checksums(boolean on) {
            this.checksums = on;
            return this;
        }

        /**
         * The bound of the staging pool in bytes (default 1 GiB); with device caches, also the bound of the device
         * staging pool on the GPU.
         */
        public Builder stagingBytes(long bytes) {
            this.stagingBytes = bytes;
            return this;
        }

        /**
         * Threads that run layer puts so they overlap the engine's compute; 0 runs every put on the caller's thread.
         * By default puts to local-memory stores ({@code memory:}, {@code shm:}), which are plain memory copies, run on
         * the caller's thread, and puts to any other store run on 2 I/O threads. Layer-wise drop-selects always run
         * on an I/O thread.
         */
        public Builder ioThreads(int n) {
            this.ioThreads = n;
            return this;
        }

        /** How long a layer-wise drop-select waits in total for the producer, in ms (default 10 000). */
        public Builder layerTimeoutMillis(long ms) {
            this.layerTimeoutMillis = ms;
            return this;
        }

        /** Builds the connector; invalid settings are {@code INVALID_ARGUMENT} errors. */
        public KVStoreConnector build() {
            if (ioThreads < -1 || stagingBytes < 1 || layerTimeoutMillis < 0 || ttlMillis < 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "connector settings: ioThreads=" + ioThreads
                        + " stagingBytes=" + stagingBytes + " layerTimeoutMillis=" + layerTimeoutMillis + " ttlMillis="
                        + ttlMillis + " (need ioThreads >= 0, stagingBytes >= 1, the rest >= 0)").build();
            }
            return new KVStoreConnector(this);
        }
    }
}
