// Over 400 lines: both roles' entry points (D's beginDropSelect, P's acceptDestination and beginInsert), the
// resources they share (registrations, staging, batches, segments) and the Builder, with the javadoc that states
// the protocol. The data path is in P2pInsertSession and P2pDropSession, the notification thread in
// P2pNotifications, the settings in P2pConfiguration.
package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.PagedLayers;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.mooncake.te.RemoteSegment;
import dev.kvconnector.mooncake.te.TransferBatch;
import dev.kvconnector.mooncake.te.TransferEngine;
import dev.kvconnector.paged.PagedKVCache;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

/**
 * A {@link KVStoreConnector} that moves a request's KV peer to peer through Mooncake's transfer engine, with no
 * store in between (vLLM V1's {@code MooncakeConnector} pattern). One connector serves both roles:
 *
 * <pre>{@code
 * // D (decode): its paged cache is registered once, at build
 * TransferEngineConnector d = TransferEngineConnector.builder(engineD, layout).registerCache(cacheD).build();
 * try (P2pDropSession drop = d.beginDropSelect(request.inNamespace(transferId), DropTarget.paged(cacheD, blocks))) {
 *     KVTransferParams params = drop.transferParams();   // to P, through the proxy's kv_transfer_params
 *     for (int layer = 0; layer < layers; layer++) {
 *         if (!drop.awaitLayer(layer)) break;            // a miss: drop.result() says why; recompute
 *     }
 *     DropResult r = drop.result();                      // D's blocks are the engine's again after this
 * }
 * // P (prefill)
 * p.acceptDestination(params);
 * try (InsertSession insert = p.beginInsert(request.inNamespace(transferId))) {
 *     for (int layer = 0; layer < layers; layer++) {
 *         engine.computeLayer(layer);
 *         insert.putLayer(layer, cacheP, blocksP);       // gathered with its word sum, WRITE submitted, returns
 *     }
 *     insert.commit();                                   // waits for the writes, then tells D it is done
 * }
 * }</pre>
 *
 * <p>A request's namespace is its transfer id, on both sides. P gathers each layer into registered staging (the
 * word sum of the raw format fused into the copy), writes it into D's blocks with one batch of WRITE requests (one
 * per run of consecutive blocks and tensor), and sends {@code L layer bytes sum} after the bytes. D accepts layer
 * {@code i} in {@code awaitLayer(i)} only when the word sum of the bytes in its blocks equals P's: a layer P did not
 * finish (P killed, a failed write) is never read as valid. D's blocks stay the request's until P's last message (a
 * commit or an abort) or until D's layer timeout passes with no message from P, which is a
 * {@link MissReason#TIMED_OUT} miss; D then tells P to stop. Notifications for transfers D does not wait for, and
 * malformed ones, go to the error handler and are counted ({@link #staleNotifications()},
 * {@link #unknownNotifications()}); they never touch D's cache. When the proxy retries the prefill on another P, D
 * moves the transfer to it ({@link P2pDropSession#moveProducer}): the layers D accepted stay, the new P writes the
 * others ({@link P2pDestination#fromLayer()}), and the old P's later messages are refused.
 *
 * <p>What D cannot prevent: the engine lets a peer write anywhere in D's registered memory, so a P that ignores
 * the protocol (or writes after D's timeout, before D's stop reaches it) can change blocks D has given back. D's
 * checks make sure such bytes are never accepted as a transfer's; a layer timeout longer than P's longest stall
 * keeps the window closed in practice, as vLLM's abort timeout does.
 *
 * <p>Not a store: nothing outlives the transfer, so {@link #lookup} answers only for a transfer whose producer has
 * committed and D has not yet ended, and a whole-request {@link #dropSelect} waits for the transfer begun with
 * {@link #beginDropSelect}. {@link DropMode} has no effect: the KV lands in D's cache and nothing else holds it.
 */
public final class TransferEngineConnector implements KVStoreConnector {
    final TransferEngine engine;
    final KVLayout layout;
    final String endpoint;
    final String engineId;
    final long layerTimeoutNanos;
    final long transferTimeoutNanos;
    final int batchCapacity;
    final int layersInFlight;
    final ErrorHandler errors;
    final SegmentPool staging;
    final P2pMetrics metrics = new P2pMetrics();
    final Map<String, P2pDropSession> inbound = new ConcurrentHashMap<>();
    final Map<String, P2pInsertSession> outbound = new ConcurrentHashMap<>();
    private final boolean ownsEngine;
    private final KeyContext keyContext;
    private final String location;
    private final Set<PagedKVCache> caches = Collections.newSetFromMap(new IdentityHashMap<>());
    private final List<MemorySegment> registered = new ArrayList<>();
    private final Map<String, P2pDestination> destinations = new ConcurrentHashMap<>();
    private final Map<String, RemoteSegment> segments = new ConcurrentHashMap<>();
    private final ConcurrentLinkedQueue<TransferBatch> idleBatches = new ConcurrentLinkedQueue<>();
    private final P2pNotifications notifications;
    private boolean closed;

    private TransferEngineConnector(Builder b, TransferEngine engine) {
        this.engine = engine;
        this.ownsEngine = b.engineUri != null;
        this.layout = b.layout;
        this.keyContext = KeyContext.of(b.modelId, b.layout);
        this.endpoint = engine.uri() + " (segment " + engine.segmentName() + ")";
        this.engineId = b.engineId == null ? engine.segmentName() : b.engineId;
        this.layerTimeoutNanos = TimeUnit.MILLISECONDS.toNanos(b.layerTimeoutMillis);
        this.transferTimeoutNanos = TimeUnit.MILLISECONDS.toNanos(b.transferTimeoutMillis);
        this.batchCapacity = b.maxBlocks * layout.tensorsPerLayer();
        this.layersInFlight = b.layersInFlight;
        this.errors = b.errors;
        this.location = b.location;
        this.staging = new SegmentPool(b.stagingBytes, s -> engine.register(s, location), engine::unregister);
        try {
            for (PagedKVCache cache : b.caches) {
                List<MemorySegment> tensors = new ArrayList<>();
                for (int l = 0; l < layout.numLayers(); l++) {
                    for (int t = 0; t < layout.tensorsPerLayer(); t++) {
                        tensors.add(cache.tensor(l, t));
                    }
                }
                engine.registerAll(tensors, location);
                registered.addAll(tensors);
                caches.add(cache);
            }
        } catch (RuntimeException e) {
            releaseRegistrations();
            staging.close();
            throw e;
        }
        this.notifications = new P2pNotifications(this);
    }

    /** A builder over {@code engine}, which the caller closes after the connector. */
    public static Builder builder(TransferEngine engine, KVLayout layout) {
        return new Builder(engine, null, layout);
    }

    /** A builder over an engine opened from {@code engineUri} ({@code mooncake-te://...}) and closed with it. */
    public static Builder builder(String engineUri, KVLayout layout) {
        return new Builder(null, engineUri, layout);
    }

    /**
     * P: takes D's destination for one transfer, from the {@code kv_transfer_params} that D's
     * {@link P2pDropSession#transferParams()} made, and checks it against this connector's layout before anything
     * is written; the next {@link #beginInsert} of a request in that transfer id writes there.
     *
     * @throws KVException {@code INVALID_ARGUMENT} naming a missing field or a block id outside D's cache,
     *     {@code SHAPE_MISMATCH} for blocks that do not fit the request, {@code INVALID_CONFIG} for another layout
     */
    public P2pDestination acceptDestination(KVTransferParams params) {
        checkOpen();
        P2pDestination d = P2pDestination.fromParams(params);
        d.check(layout, endpoint);
        destinations.put(d.transferId(), d);
        return d;
    }

    /** P: {@link #acceptDestination} then {@link #beginInsert(RequestTokens)}. */
    public InsertSession beginInsert(RequestTokens request, KVTransferParams destination) {
        acceptDestination(destination);
        return beginInsert(request);
    }

    /**
     * P: begins writing the request into the destination accepted for its transfer id (its namespace).
     *
     * @throws KVException {@code INVALID_ARGUMENT} without a namespace or without an accepted destination (naming
     *     the transfer id), {@code SHAPE_MISMATCH} when D expects another token count, {@code STORE_UNREACHABLE}
     *     naming D's segment when it cannot be reached
     */
    @Override
    public InsertSession beginInsert(RequestTokens request) {
        checkOpen();
        String tid = transferId(request, "beginInsert");
        P2pDestination d = destinations.remove(tid);
        if (d == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "no destination for transfer " + tid
                            + ": D has not registered where it wants this request's KV")
                    .store(endpoint).operation("beginInsert").key(tid)
                    .hint("pass D's kv_transfer_params (P2pDropSession.transferParams()) to acceptDestination first")
                    .build();
        }
        if (d.tokens() != request.totalTokens()) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, "D expects " + d.tokens() + " tokens for transfer " + tid
                    + ", the request has " + request.totalTokens()).store(endpoint).operation("beginInsert").key(tid)
                    .build();
        }
        P2pInsertSession s = new P2pInsertSession(this, d, segment(d.segment()));
        if (outbound.putIfAbsent(tid, s) != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "transfer " + tid + " already has an insert in flight")
                    .store(endpoint).operation("beginInsert").key(tid).build();
        }
        return s;
    }

    /** P2P keeps nothing: the tokens of a transfer that P committed and D has not ended yet, else 0. */
    @Override
    public int lookup(RequestTokens request) {
        P2pDropSession s = request.namespace() == null ? null : inbound.get(request.namespace());
        return s == null ? 0 : s.committedTokens();
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        return dropSelect(request, target, DropMode.CONSUME);
    }

    /**
     * Waits for the transfer begun with {@link #beginDropSelect} for the request's transfer id (P2P needs D's
     * destination before P computes); an {@link MissReason#ABSENT} miss when none was begun.
     */
    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode) {
        checkOpen();
        String tid = transferId(request, "dropSelect");
        P2pDropSession s = inbound.get(tid);
        if (s == null) {
            DropResult miss = DropResult.miss(request.totalTokens(), MissReason.ABSENT, "no drop-select was begun "
                    + "for transfer " + tid + " on " + endpoint + ": P2P needs beginDropSelect, and its "
                    + "transferParams() at P, before P computes");
            metrics.result(miss);
            return miss;
        }
        if (s.target() != target) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "transfer " + tid + " was begun with another target")
                    .store(endpoint).operation("dropSelect").key(tid).build();
        }
        return s.result();
    }

    /**
     * D: registers where the request's KV goes (its blocks in a cache registered with
     * {@link Builder#registerCache}) and starts waiting for P; {@link P2pDropSession#transferParams()} is what P
     * needs.
     *
     * @throws KVException {@code INVALID_ARGUMENT} without a namespace or with a transfer already in flight;
     *     {@code UNSUPPORTED} for a target that is not a registered host paged cache, or slots that are not whole
     *     blocks; {@code SHAPE_MISMATCH} as the sink's check
     */
    @Override
    public P2pDropSession beginDropSelect(RequestTokens request, DropTarget target) {
        checkOpen();
        String tid = transferId(request, "beginDropSelect");
        if (!(target.layers() instanceof PagedLayers paged) || !isRegistered(paged.cache())) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "a peer-to-peer drop-select writes into a registered host "
                            + "paged cache; transfer " + tid + " targets " + target.layers().getClass().getSimpleName()
                            + (target.layers() instanceof PagedLayers ? " over a cache that is not registered" : ""))
                    .store(endpoint).operation("beginDropSelect").key(tid)
                    .hint("register the cache with TransferEngineConnector.Builder.registerCache and target "
                            + "DropTarget.paged(cache, blockTable)").build();
        }
        paged.check(layout, request.totalTokens(), "beginDropSelect", endpoint);
        P2pDropSession s = new P2pDropSession(this, tid, request.totalTokens(), target, paged);
        if (inbound.putIfAbsent(tid, s) != null) {
            s.release();
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "transfer " + tid + " already has a drop-select in "
                    + "flight").store(endpoint).operation("beginDropSelect").key(tid).build();
        }
        return s;
    }

    private boolean isRegistered(PagedKVCache cache) {
        synchronized (caches) {
            return caches.contains(cache);
        }
    }

    private String transferId(RequestTokens request, String op) {
        if (request.namespace() == null || request.namespace().isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a peer-to-peer transfer needs a transfer id: the "
                    + "request has no namespace").store(endpoint).operation(op)
                    .hint("use request.inNamespace(kv_transfer_params.transfer_id) on P and on D").build();
        }
        return request.namespace();
    }

    RemoteSegment segment(String name) {
        return segments.computeIfAbsent(name, engine::openSegment);
    }

    TransferBatch acquireBatch() {
        TransferBatch b = idleBatches.poll();
        return b != null ? b : engine.newBatch(batchCapacity);
    }

    /** Takes back a batch whose tasks have all ended; one that cannot be reset is closed. */
    void releaseBatch(TransferBatch batch) {
        if (reset(batch)) {
            idleBatches.add(batch);
        }
    }

    /** Empties a batch whose tasks have all ended, for reuse; false when it could not be, and was closed. */
    boolean reset(TransferBatch batch) {
        try {
            batch.reset();
            return true;
        } catch (KVException e) {
            errors.onError("p2p batch reset on " + endpoint, e);
            batch.close();
            return false;
        }
    }

    /** Best-effort message to a peer: a peer that is gone cannot be told, and needs no telling. */
    void tell(String peer, String transferId, String message) {
        try {
            int rc = engine.notify(segment(peer), transferId, message);
            if (rc != 0) {
                errors.onError("p2p notify " + peer + " of transfer " + transferId, KVException.of(
                        ErrorCode.IO_ERROR, "genNotifyInEngine returned " + rc).store(endpoint).build());
            }
        } catch (KVException e) {
            errors.onError("p2p notify " + peer + " of transfer " + transferId, e);
        }
    }

    /** Called when D's transfer ends: later messages for it are stale. */
    void ended(P2pDropSession s, String why) {
        inbound.remove(s.transferId(), s);
        notifications.ended(s.transferId(), why);
    }

    /**
     * Messages for transfers this D had already ended (a late producer), and from peers that are not a transfer's
     * producer (one its prefill moved away from, {@link P2pDropSession#moveProducer}), ignored.
     */
    public long staleNotifications() {
        return notifications.stale();
    }

    /** Messages for transfers this connector never knew, and malformed ones, ignored. */
    public long unknownNotifications() {
        return notifications.unknown();
    }

    /** The engine this connector moves bytes with. */
    public TransferEngine engine() {
        return engine;
    }

    /** D's engine id, sent as {@code remote_engine_id}. */
    public String engineId() {
        return engineId;
    }

    @Override
    public KVLayout layout() {
        return layout;
    }

    @Override
    public KeyContext keyContext() {
        return keyContext;
    }

    @Override
    public String endpoint() {
        return endpoint;
    }

    @Override
    public ConnectorMetrics.Snapshot metrics() {
        return metrics.snapshot();
    }

    @Override
    public void resetMetrics() {
        metrics.reset();
    }

    private void checkOpen() {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the peer-to-peer connector is closed").store(endpoint).build();
        }
    }

    private void releaseRegistrations() {
        for (MemorySegment s : registered) {
            engine.unregister(s);
        }
        registered.clear();
    }

    /**
     * Aborts inserts and ends drop-selects still open, stops the notification thread, releases the registrations
     * and staging, and closes the engine when the connector opened it. Idempotent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        List.copyOf(outbound.values()).forEach(P2pInsertSession::abort);
        List.copyOf(inbound.values()).forEach(P2pDropSession::cancel);
        notifications.close();
        try {
            for (TransferBatch b; (b = idleBatches.poll()) != null; ) {
                b.close();
            }
            if (!ownsEngine) {
                segments.values().forEach(engine::closeSegment);
                releaseRegistrations();
                staging.segments().forEach(engine::unregister);
            }
        } finally {
            staging.close();
            if (ownsEngine) {
                engine.close();
            }
        }
    }

    /** Builds a {@link TransferEngineConnector}; settings start from {@link P2pConfiguration}'s properties or defaults. */
    public static final class Builder {
        private final TransferEngine engine;
        private final String engineUri;
        private final KVLayout layout;
        private final List<PagedKVCache> caches = new ArrayList<>();
        private String modelId = "p2p";
        private String engineId;
        private String location = P2pConfiguration.location();
        private long layerTimeoutMillis = P2pConfiguration.layerTimeoutMillis();
        private long transferTimeoutMillis = P2pConfiguration.transferTimeoutMillis();
        private long stagingBytes = P2pConfiguration.stagingBytes();
        private int maxBlocks = P2pConfiguration.maxBlocks();
        private int layersInFlight = P2pConfiguration.layersInFlight();
        private ErrorHandler errors = ErrorHandler.LOGGING;

        private Builder(TransferEngine engine, String engineUri, KVLayout layout) {
            this.engine = engine;
            this.engineUri = engineUri;
            this.layout = layout;
        }

        /** D: a paged cache P may write into, registered with the engine at build and released at close. */
        public Builder registerCache(PagedKVCache cache) {
            caches.add(cache);
            return this;
        }

        /** The model id of {@link #keyContext()}. */
        public Builder modelId(String id) {
            modelId = id;
            return this;
        }

        /** The engine id D publishes as {@code remote_engine_id}; by default the engine's segment name. */
        public Builder engineId(String id) {
            engineId = id;
            return this;
        }

        /** Where registered memory lives: {@code cpu:N} (default {@code cpu:0}). */
        public Builder memoryLocation(String where) {
            location = where;
            return this;
        }

        /** D's wait for P's next message, in ms, before a {@link MissReason#TIMED_OUT} miss. */
        public Builder layerTimeoutMillis(long ms) {
            layerTimeoutMillis = ms;
            return this;
        }

        /** P's wait for its writes to end, in ms. */
        public Builder transferTimeoutMillis(long ms) {
            transferTimeoutMillis = ms;
            return this;
        }

        /** Bytes of registered staging. */
        public Builder stagingBytes(long bytes) {
            stagingBytes = bytes;
            return this;
        }

        /** The most blocks one request may span. */
        public Builder maxBlocksPerRequest(int blocks) {
            maxBlocks = blocks;
            return this;
        }

        /**
         * P: the layers (or hidden states) one transfer keeps in flight before a put waits for the oldest
         * ({@link P2pConfiguration#LAYERS_IN_FLIGHT_PROP_NAME}).
         */
        public Builder layersInFlight(int layers) {
            layersInFlight = layers;
            return this;
        }

        /** Receives failures on the notification thread and of best-effort messages. */
        public Builder errorHandler(ErrorHandler handler) {
            errors = handler;
            return this;
        }

        /**
         * Validates the settings, registers the caches and starts the notification thread.
         *
         * @throws KVException {@code INVALID_CONFIG} naming a setting out of range; the engine's errors
         */
        public TransferEngineConnector build() {
            require(layout != null, "a layout");
            require(layerTimeoutMillis > 0, "layerTimeoutMillis > 0, not " + layerTimeoutMillis);
            require(transferTimeoutMillis > 0, "transferTimeoutMillis > 0, not " + transferTimeoutMillis);
            require(stagingBytes > 0, "stagingBytes > 0, not " + stagingBytes);
            require(maxBlocks > 0, "maxBlocksPerRequest > 0, not " + maxBlocks);
            require(layersInFlight > 0, "layersInFlight > 0, not " + layersInFlight);
            require(modelId != null && !modelId.isEmpty(), "a model id");
            for (PagedKVCache c : caches) {
                require(c.layout().sameKvBytesAs(layout), "caches of the connector's layout " + layout.name()
                        + ", not " + c.layout().name());
            }
            TransferEngine e = engine != null ? engine : TransferEngine.open(engineUri);
            try {
                return new TransferEngineConnector(this, e);
            } catch (RuntimeException ex) {
                if (engine == null) {
                    e.close();
                }
                throw ex;
            }
        }

        private static void require(boolean ok, String what) {
            if (!ok) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "peer-to-peer connector: needs " + what)
                        .operation("build").build();
            }
        }
    }
}
