package dev.kvconnector.connector;

import dev.kvconnector.codec.Completion;
import dev.kvconnector.codec.ObjectCodec;
import dev.kvconnector.codec.ObjectCodecs;
import dev.kvconnector.codec.RawLayerCodec;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.KvEventEmitter;
import dev.kvconnector.events.KvEventListener;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.RegisteredMemory;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreSubscription;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link KVStoreConnector} over a byte store ({@link KVStore}). Objects, per chunk of the request, are named by
 * a {@link dev.kvconnector.key.KeyScheme} and laid out by an {@link ObjectCodec} of the same granularity (by
 * default {@code kvc-v1} with {@link RawLayerCodec}: one object per layer holding K and V, or the MLA latent, with a
 * 64-byte header carrying the layout fingerprint and checksums); one object for the hidden states; and a manifest
 * written last that makes the chunk visible. Codecs whose objects hold every layer of a chunk
 * ({@link Completion#PER_CHUNK}: LMCache chunk objects, vLLM V0) go through {@code ChunkObjectInsertSession} and
 * {@code ChunkObjectDropSession} instead: no manifest, the chunk object itself makes the chunk visible.
 *
 * <p>Thread-safe: many sessions may run at once. Layer puts run on the connector's I/O threads so they overlap the
 * engine's compute; staging memory comes from a pool (no arena per transfer), registered once with stores that
 * support zero-copy registration.
 *
 * <p>Sources and sinks that the CPU cannot address (device paged caches, in {@code dev.kvconnector.cuda}) move
 * their layers through {@link ConnectorResources}: the host staging pool, the store's registration, and resources
 * shared by the connector's transfers (a device staging pool), opened on first use and closed with the connector.
 *
 * <p>Over 400 lines because it nests its {@link Builder} (the connector's context: one documented setter per
 * setting) and its {@link ConnectorResources}, both of which read the connector's private state; the connector
 * itself is about 350.
 */
public final class StoreConnector implements KVStoreConnector {
    private static final Logger LOG = LoggerFactory.getLogger(StoreConnector.class);
    private final KVStore store;
    private final KVLayout layout;
    private final KeyScheme scheme;
    private final ObjectCodec codec;
    private final boolean skipExisting;
    private final boolean ownsStore;
    private final KeyContext keyContext;
    private final DropMode dropMode;
    private final PutOptions putOptions;
    private final PutOptions layerPutOptions;
    private final boolean claims;
    private final boolean views;
    private final boolean pipelinedReads;
    private final boolean removes;
    private final boolean checksums;
    private final long layerTimeoutMillis;
    private final SegmentPool staging;
    private final RequestScratch.Pool scratch = new RequestScratch.Pool();
    /** Whole-request drop-select sessions of a per-layer codec, idle, reused call after call. */
    private final IdlePool<StoreDropSession> idleDrops = new IdlePool<>(64);
    private final ThreadPoolExecutor io;
    private final boolean inlinePuts;
    private final RegisteredMemory registration;
    private final boolean deviceDirect;
    private final long stagingBytes;
    private final Object sharedLock = new Object();
    private final Map<Class<?>, AutoCloseable> shared = new LinkedHashMap<>();
    private final List<Consumer<MemorySegment>> stagingListeners = new CopyOnWriteArrayList<>();
    private final Resources resources = new Resources();
    private final ConnectorMetrics metrics = new ConnectorMetrics();
    private final ErrorHandler errorHandler;
    /** Null without a listener, so the paths that emit test one field and allocate nothing. */
    private final KvEventEmitter events;
    /** With a listener and a store that declares EVENTS: what the store tells, forwarded; else null. */
    private final StoreEventForwarder storeEventForwarder;
    private final StoreSubscription storeEvents;
    private volatile boolean closed;
    private volatile boolean warnedNoRemove;

    private StoreConnector(Builder b, KVStore store) {
        this.store = store;
        this.ownsStore = b.store == null;
        this.layout = b.layout;
        this.scheme = b.schemeInstance != null ? b.schemeInstance : KeySchemes.byName(b.keyScheme);
        this.codec = b.codec != null ? b.codec : ObjectCodecs.forScheme(scheme, layout);
        this.errorHandler = b.errorHandler;
        this.skipExisting = b.skipExisting;
        if (skipExisting && codec.completion() != Completion.PER_CHUNK) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "skipExisting needs a codec whose objects hold whole "
                    + "chunks; codec " + codec.name() + " writes one object per layer, made visible by a manifest")
                    .store(store.uri()).operation("connect").hint("drop skipExisting, or use an LMCache codec").build();
        }
        ObjectCodec.requirePair(scheme, codec);
        codec.requireStore(store.uri());
        int chunkTokens = codec.chunkTokens(layout, b.chunkTokens);
        if (b.chunkTokensSet && chunkTokens != b.chunkTokens) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "codec " + codec.name() + " stores one object per "
                            + chunkTokens + " tokens, but chunkTokens(" + b.chunkTokens + ") was set")
                    .store(store.uri()).operation("connect")
                    .hint("drop chunkTokens, or set it to " + chunkTokens).build();
        }
        this.keyContext = new KeyContext(b.modelId == null ? layout.name() : b.modelId, layout, b.tpRank, b.worldSize,
                chunkTokens);
        this.dropMode = b.dropMode;
        if (dropMode == DropMode.CONSUME) {
            store.checkConsumeMode();
        }
        this.putOptions = PutOptions.DEFAULT.withTtlMillis(b.ttlMillis);
        this.layerPutOptions = putOptions.withImmutable(scheme.contentAddressed());
        var caps = store.capabilities();
        this.claims = caps.contains(StoreCapability.CLAIM);
        this.views = caps.contains(StoreCapability.VIEW);
        this.pipelinedReads = caps.contains(StoreCapability.PIPELINED_READ);
        this.removes = caps.contains(StoreCapability.REMOVE);
        this.checksums = b.checksums;
        this.layerTimeoutMillis = b.layerTimeoutMillis;
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
        this.events = b.events == null ? null : new KvEventEmitter(b.events,
                b.instanceId != null ? b.instanceId : ConnectorConfiguration.instance(), store.uri(), scheme.name(),
                chunkTokens, KvcV1KeyScheme.NAME.equals(scheme.name())
                        ? java.util.HexFormat.of().formatHex(KvcV1KeyScheme.rootHash(keyContext, null)) : null,
                errorHandler);
        if (ownsStore) {
            store.errorHandler(errorHandler);
        }
        // Last, so that nothing after it can fail and leave the subscription open.
        this.storeEventForwarder = events != null && caps.contains(StoreCapability.EVENTS)
                ? new StoreEventForwarder(events, scheme, store.uri()) : null;
        this.storeEvents = storeEventForwarder == null ? null
                : store.subscribe(storeEventForwarder, (where, failure) -> onIoError(where, failure));
    }

    /** Starts a builder for a connector over {@code store} with {@code layout}; the caller closes the store. */
    public static Builder builder(KVStore store, KVLayout layout) {
        if (store == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a connector needs a store and a layout").build();
        }
        return new Builder(store, null, layout);
    }

    /** Starts a builder for a connector over the store at {@code storeUri}, opened by build() and closed by close(). */
    public static Builder builder(String storeUri, KVLayout layout) {
        if (storeUri == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a connector needs a store URI and a layout").build();
        }
        return new Builder(null, storeUri, layout);
    }

    @Override
    public InsertSession beginInsert(RequestTokens request) {
        ChunkGeometry geo = geometry(request, "beginInsert");
        return codec.completion() == Completion.PER_CHUNK ? new ChunkObjectInsertSession(this, geo, skipExisting)
                : new StoreInsertSession(this, geo);
    }

    /** {@inheritDoc} Reuses {@code ended}, and with the same request shape its plan too, for a per-layer codec. */
    @Override
    public InsertSession beginInsert(RequestTokens request, InsertSession ended) {
        if (ended == null) {
            return beginInsert(request);
        }
        if (!(ended instanceof StoreInsertBase b) || b.connector != this) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the session to reuse was not begun by this connector")
                    .store(store.uri()).operation("beginInsert").build();
        }
        if (!b.ended()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the session to reuse is still open").store(store.uri())
                    .operation("beginInsert").hint("commit, abort or close it before beginning another insert in it")
                    .build();
        }
        if (!(b instanceof StoreInsertSession s)) {
            return beginInsert(request);
        }
        s.restart(geometry(request, "beginInsert", s.geo));
        return s;
    }

    /** {@inheritDoc} Reads every chunk's manifest in one batch call. */
    @Override
    public int lookup(RequestTokens request) {
        ChunkGeometry geo = geometry(request, "lookup");
        int n = geo.chunks.length;
        if (n == 0) {
            return 0;
        }
        if (codec.completion() == Completion.PER_CHUNK) {
            // Formats without a manifest (LMCache, vLLM) make a chunk visible with its object, and with its peers'.
            int matched = 0;
            for (int c = 0; c < n && store.exists(geo.objects.layerKey(c, 0)) && peersHold(geo.chunks[c]); c++) {
                matched = geo.chunks[c].endToken();
            }
            return matched;
        }
        long slot = ChunkGeometry.align(ChunkGeometry.MANIFEST_BYTES);
        MemorySegment buf = staging.acquire(n * slot);
        RequestScratch s = scratch.take(n, n);
        try {
            for (int c = 0; c < n; c++) {
                geo.chunks[c].manifestKey(s.keys[c]);
                s.segments[c] = buf.asSlice(c * slot, ChunkGeometry.MANIFEST_BYTES);
            }
            store.getIntoBatch(s.keys, s.segments, n, s.results);
            int matched = 0;
            for (int c = 0; c < n && !GetResult.isMiss(s.results[c]); c++) {
                matched = geo.chunks[c].endToken();
            }
            return matched;
        } finally {
            scratch.give(s);
            staging.release(buf);
        }
    }

    /** Whether every other rank that will load {@code chunk} holds it ({@link KeyScheme#peerLookupKeys}). */
    private boolean peersHold(ChunkKeys chunk) {
        for (String key : scheme.peerLookupKeys(keyContext, chunk)) {
            if (!store.exists(key)) {
                return false;
            }
        }
        return true;
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        return dropSelect(request, target, dropMode);
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode) {
        long timeout = layerTimeoutMillis * 1_000_000L;
        if (codec.completion() == Completion.PER_CHUNK) {
            ChunkObjectDropSession s = new ChunkObjectDropSession(this, dropGeometry(request, target, null), target,
                    mode, false, timeout, request.totalTokens());
            s.run();
            return s.result();
        }
        StoreDropSession s = idleDrops.poll();
        ChunkGeometry geo = dropGeometry(request, target, s == null ? null : s.geo);
        if (s == null) {
            s = new StoreDropSession(this, geo, target, mode, false, timeout, request.totalTokens());
        } else {
            s.restart(geo, target, mode, timeout, request.totalTokens());
        }
        s.run();
        DropResult result = s.result();
        idleDrops.offer(s);
        return result;
    }

    /** {@inheritDoc} Waits at most the connector's layer timeout overall. */
    @Override
    public DropSession beginDropSelect(RequestTokens request, DropTarget target) {
        ChunkGeometry geo = dropGeometry(request, target, null);
        if (codec.completion() == Completion.PER_CHUNK) {
            ChunkObjectDropSession s = new ChunkObjectDropSession(this, geo, target, dropMode, true,
                    layerTimeoutMillis * 1_000_000L, request.totalTokens());
            execute(s.runner);
            return s;
        }
        StoreDropSession s = new StoreDropSession(this, geo, target, dropMode, true, layerTimeoutMillis * 1_000_000L,
                request.totalTokens());
        execute(s.runner);
        return s;
    }

    /** {@inheritDoc} Reuses {@code ended}, and with the same request shape its plan too, for a per-layer codec. */
    @Override
    public DropSession beginDropSelect(RequestTokens request, DropTarget target, DropSession ended) {
        if (ended == null) {
            return beginDropSelect(request, target);
        }
        if (!(ended instanceof StoreDropBase b) || b.connector != this) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the session to reuse was not begun by this connector")
                    .store(store.uri()).operation("beginDropSelect").build();
        }
        if (!b.ended()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the session to reuse is still loading")
                    .store(store.uri()).operation("beginDropSelect")
                    .hint("wait for its result() or close() it before beginning another drop-select in it").build();
        }
        if (!(b instanceof StoreDropSession s)) {
            return beginDropSelect(request, target);
        }
        s.restart(dropGeometry(request, target, s.geo), target, dropMode, layerTimeoutMillis * 1_000_000L,
                request.totalTokens());
        execute(s.runner);
        return s;
    }

    private ChunkGeometry dropGeometry(RequestTokens request, DropTarget target, ChunkGeometry previous) {
        ChunkGeometry geo = geometry(request, "dropSelect", previous);
        target.layers().check(layout, geo.plan.totalTokens(), "dropSelect", store.uri());
        return geo;
    }

    private ChunkGeometry geometry(RequestTokens request, String op) {
        return geometry(request, op, null);
    }

    /**
     * The geometry of {@code request}: {@code previous}, an ended session's, rewritten in place when the key scheme can
     * replan it (the same shape) and the codec's plan reads its keys from the key plan; else a new one.
     */
    private ChunkGeometry geometry(RequestTokens request, String op, ChunkGeometry previous) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the connector is closed").store(store.uri()).operation(op).build();
        }
        if (previous != null && previous.objects.keysFollowKeyPlan()
                && scheme.replan(keyContext, request, previous.plan)) {
            return previous;
        }
        KeyPlan plan = scheme.plan(keyContext, request);
        return new ChunkGeometry(codec.plan(plan, layout, checksums), layout);
    }

    @Override
    public ConnectorMetrics.Snapshot metrics() {
        return metrics.snapshot();
    }

    @Override
    public void resetMetrics() {
        metrics.reset();
    }

    /** The store. */
    public KVStore store() {
        return store;
    }

    @Override
    public String endpoint() {
        return store.uri();
    }

    /** The resources lent to sources and sinks that move layers themselves. */
    ConnectorResources resources() {
        return resources;
    }

    @Override
    public KVLayout layout() {
        return layout;
    }

    @Override
    public boolean holdsHiddenStates() {
        return codec.holdsHiddenStates();
    }

    @Override
    public boolean bindsNamespace() {
        return scheme.bindsNamespace();
    }

    @Override
    public KeyContext keyContext() {
        return keyContext;
    }

    private void onNewStagingSegment(MemorySegment segment) {
        if (registration != null) {
            registration.register(segment);
        }
        for (Consumer<MemorySegment> l : stagingListeners) {
            l.accept(segment);
        }
    }

    /** Hands a failure on an I/O thread to the configured {@link ErrorHandler}. */
    void onIoError(String where, Throwable failure) {
        try {
            errorHandler.onError(where + " " + store.uri(), failure);
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }

    ConnectorMetrics metricsRecorder() {
        return metrics;
    }

    SegmentPool staging() {
        return staging;
    }

    /** The sessions' key and batch arrays, reused request after request. */
    RequestScratch.Pool scratch() {
        return scratch;
    }

    PutOptions putOptions() {
        return putOptions;
    }

    /** Options of layer puts: immutable when the key scheme is content-addressed. */
    PutOptions layerPutOptions() {
        return layerPutOptions;
    }

    /** Whether the store declares {@link StoreCapability#CLAIM}. */
    boolean claims() {
        return claims;
    }

    /** Whether the store declares {@link StoreCapability#VIEW}. */
    boolean views() {
        return views;
    }

    /** Whether the store sends a batch read and answers it later ({@code PIPELINED_READ}). */
    boolean pipelinedReads() {
        return pipelinedReads;
    }

    boolean checksums() {
        return checksums;
    }

    long layerTimeoutMillis() {
        return layerTimeoutMillis;
    }

    /**
     * Removes keys (an aborted insert's); a store without {@link StoreCapability#REMOVE} (an LMCache server, whose
     * protocol has no delete) keeps them until it evicts them, which is logged once rather than failing. Unmanifested
     * objects stay invisible.
     *
     * @return whether the objects were removed
     */
    boolean removeOrKeep(String[] keys, int count) {
        if (!removes("abort")) {
            return false;
        }
        store.removeBatch(keys, count);
        return true;
    }

    /**
     * After a complete consume-mode drop-select: removes {@code keys[0..count)} past the read's lease. A store without
     * {@link StoreCapability#REMOVE} keeps them, as {@link #removeOrKeep} describes, rather than failing a read that
     * already succeeded; a removal that fails goes to the error handler instead of failing the drop-select, whose
     * layers have already landed: the objects stay until the store evicts them.
     *
     * @return whether the objects were removed
     */
    boolean consumeOrKeep(StoreKey[] keys, int count) {
        if (!removes("drop-select")) {
            return false;
        }
        if (storeEventForwarder != null) {
            storeEventForwarder.consuming(keys, count);
        }
        try {
            store.removeConsumed(keys, count);
        } catch (KVException e) {
            onIoError("consume-mode removal of " + count + " objects after a complete drop-select from", e);
            return false;
        }
        return true;
    }

    /** Whether the store removes; the first time it does not, says so. */
    private boolean removes(String op) {
        if (!removes && !warnedNoRemove) {
            warnedNoRemove = true;
            LOG.warn("{} cannot remove objects (it does not declare {}); after {} they stay until the store "
                    + "evicts them. Use DropMode.RETAIN with this store", store.uri(), StoreCapability.REMOVE, op);
        }
        return removes;
    }

    /** The first {@code count} chunks of {@code geo} were committed: a stored event each, when listened to. */
    void emitStored(ChunkGeometry geo, int count) {
        if (events != null) {
            events.stored(geo.chunks, count, layout.numLayers());
        }
    }

    /** The first {@code count} chunks of {@code geo} were consumed and removed: an event each. */
    void emitConsumed(ChunkGeometry geo, int count) {
        if (events != null) {
            events.removed(geo.chunks, count, RemovalReason.CONSUMED);
        }
    }

    /** Returns {@code result}, after a load-failure event when it is a miss and someone listens. */
    DropResult emitResult(ChunkGeometry geo, DropResult result) {
        if (events != null && result.reason() != null) {
            events.loadFailed(geo.chunks.length == 0 ? null : geo.chunks[0], result.reason(),
                    result.requestedTokens());
        }
        return result;
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
        if (storeEvents != null) {
            storeEvents.close();
        }
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
            closeShared();
        } finally {
            try {
                staging.close();
            } finally {
                if (ownsStore) {
                    store.close();
                }
            }
        }
    }

    private void closeShared() {
        List<AutoCloseable> open;
        synchronized (sharedLock) {
            open = new ArrayList<>(shared.values());
            shared.clear();
        }
        RuntimeException first = null;
        for (int i = open.size() - 1; i >= 0; i--) {
            try {
                open.get(i).close();
            } catch (Exception e) {
                if (first == null) {
                    first = e instanceof RuntimeException re ? re : KVException.of(ErrorCode.INTERNAL,
                            "closing a shared resource failed: " + e).store(store.uri()).operation("close").cause(e)
                            .build();
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** The connector's side of {@link ConnectorResources}. */
    private final class Resources implements ConnectorResources {
        @Override
        public String endpoint() {
            return store.uri();
        }

        @Override
        public long stagingBytes() {
            return stagingBytes;
        }

        @Override
        public MemorySegment acquireStaging(long bytes) {
            return staging.acquire(bytes);
        }

        @Override
        public void releaseStaging(MemorySegment segment) {
            staging.release(segment);
        }

        @Override
        public void eachStagingSegment(Consumer<MemorySegment> action) {
            // Listening before visiting what exists, so a segment allocated meanwhile is seen by one side or both.
            stagingListeners.add(action);
            for (MemorySegment s : staging.segments()) {
                action.accept(s);
            }
        }

        @Override
        public boolean storeTakesDeviceMemory() {
            return deviceDirect;
        }

        @Override
        public void register(MemorySegment segment) {
            if (registration != null) {
                registration.register(segment);
            }
        }

        @Override
        public void unregister(MemorySegment segment) {
            if (registration != null) {
                registration.unregister(segment);
            }
        }

        @Override
        public <T extends AutoCloseable> T shared(Class<T> type, Supplier<T> open) {
            synchronized (sharedLock) {
                if (closed) {
                    throw KVException.of(ErrorCode.CLOSED, "the connector is closed").store(store.uri())
                            .operation("open " + type.getSimpleName()).build();
                }
                AutoCloseable have = shared.get(type);
                if (have == null) {
                    have = open.get();
                    shared.put(type, have);
                }
                return type.cast(have);
            }
        }
    }

    /**
     * Configures a {@link StoreConnector}: the connector's context, validated once by {@link #build()}. Every
     * setting starts from its {@link ConnectorConfiguration} system property or default, which suits one 8-GPU node.
     */
    public static final class Builder {
        private final KVStore store;
        private final String storeUri;
        private final KVLayout layout;
        private ObjectCodec codec;
        private String modelId;
        private String keyScheme = ConnectorConfiguration.keyScheme();
        private KeyScheme schemeInstance;
        private boolean skipExisting;
        private int tpRank;
        private int worldSize = 1;
        private int chunkTokens = ConnectorConfiguration.chunkTokens();
        private boolean chunkTokensSet;
        private DropMode dropMode = ConnectorConfiguration.dropMode();
        private long ttlMillis = ConnectorConfiguration.ttlMillis();
        private boolean checksums = ConnectorConfiguration.checksums();
        private long stagingBytes = ConnectorConfiguration.stagingBytes();
        private int ioThreads = ConnectorConfiguration.ioThreads();
        private long layerTimeoutMillis = ConnectorConfiguration.layerTimeoutMillis();
        private ErrorHandler errorHandler = ErrorHandler.LOGGING;
        private KvEventListener events;
        /** Null for {@link ConnectorConfiguration#instance()}, read only when there are events: it looks up the host. */
        private String instanceId;

        private Builder(KVStore store, String storeUri, KVLayout layout) {
            if (layout == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a connector needs a store and a layout").build();
            }
            this.store = store;
            this.storeUri = storeUri;
            this.layout = layout;
        }

        /** Receives failures on the connector's I/O threads (default {@link ErrorHandler#LOGGING}). */
        public Builder errorHandler(ErrorHandler handler) {
            this.errorHandler = handler;
            return this;
        }

        /**
         * Receives the connector's KV events (default none, and then the paths allocate nothing for them): a chunk
         * stored at an insert's commit, removed when a consume-mode drop-select removes it, and a load failure for
         * every drop-select miss. {@link dev.kvconnector.events.ZmqKvEventPublisher} publishes them on a socket.
         */
        public Builder events(KvEventListener listener) {
            this.events = listener;
            return this;
        }

        /** The instance name the events carry (default {@link ConnectorConfiguration#instance()}). */
        public Builder instanceId(String name) {
            this.instanceId = name;
            return this;
        }

        /**
         * The codec that lays out the key scheme's objects; by default the one the scheme implies
         * ({@link ObjectCodecs#forScheme}: {@link RawLayerCodec} for {@code kvc-v1}).
         */
        public Builder codec(ObjectCodec objectCodec) {
            this.codec = objectCodec;
            return this;
        }

        /** The served model's id, bound into every key (default: the layout's name). */
        public Builder modelId(String id) {
            this.modelId = id;
            return this;
        }

        /** The key scheme by name (default {@code kvc-v1}). */
        public Builder keyScheme(String name) {
            this.keyScheme = name;
            this.schemeInstance = null;
            return this;
        }

        /** The key scheme itself, for a scheme with settings (LMCache's format, partial chunks and tags). */
        public Builder keyScheme(KeyScheme scheme) {
            this.schemeInstance = scheme;
            return this;
        }

        /**
         * Whether an insert skips the chunks whose object is already present when it begins (LMCache's "store only
         * what is missing"); only for codecs whose objects hold a whole chunk. Default false.
         */
        public Builder skipExisting(boolean skip) {
            this.skipExisting = skip;
            return this;
        }

        /** This worker's tensor-parallel rank and size (default 0 of 1). */
        public Builder tensorParallel(int rank, int size) {
            this.tpRank = rank;
            this.worldSize = size;
            return this;
        }

        /**
         * Tokens per chunk, the granularity of prefix matching (default 256). A codec whose objects hold a fixed
         * number of tokens (vLLM V1's: one block) sets it; setting another number is then an error.
         */
        public Builder chunkTokens(int tokens) {
            this.chunkTokens = tokens;
            this.chunkTokensSet = true;
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

        /** Whether layer objects carry a checksum of their payload (default true). */
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
        public StoreConnector build() {
            if (ioThreads < -1 || stagingBytes < 1 || layerTimeoutMillis < 0 || ttlMillis < 0
                    || errorHandler == null || dropMode == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "connector settings: ioThreads=" + ioThreads
                        + " stagingBytes=" + stagingBytes + " layerTimeoutMillis=" + layerTimeoutMillis + " ttlMillis="
                        + ttlMillis + " errorHandler=" + errorHandler + " dropMode=" + dropMode
                        + " (need ioThreads >= 0, stagingBytes >= 1, the rest >= 0, an error handler and a drop mode)")
                        .build();
            }
            if (store != null) {
                return new StoreConnector(this, store);
            }
            KVStore opened = KVStores.open(storeUri);
            try {
                return new StoreConnector(this, opened);
            } catch (RuntimeException e) {
                opened.close();
                throw e;
            }
        }
    }
}
