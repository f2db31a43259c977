package dev.kvconnector.demo;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.spi.ConnectorContext;
import dev.kvconnector.connector.spi.KVConnectors;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.KvEventListener;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.Tensor;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;
import java.util.UUID;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reference engine: the demo model on an off-heap paged KV cache, greedy decoding, and an XpYd role.
 *
 * <ul>
 *   <li>A producer inserts, during the prefill, each layer's K and V as soon as the layer has written them to the
 *       cache, then the hidden states {@code [T, hiddenSize]} (FP32, before the final norm), then commits.</li>
 *   <li>A consumer drop-selects the prompt's KV and hidden states into its own cache before the prefill (layer by
 *       layer when layer-wise loading is on), samples the first token from the last hidden state, and decodes
 *       without running the prefill. On any miss it recomputes, counts the miss by reason and logs it at INFO.</li>
 * </ul>
 * With {@link Builder#p2p} the KV moves peer to peer instead ({@link P2pTransport}: D sends its destination to P,
 * and P writes each layer into D's blocks as soon as it has computed it and the destination is there, keeping the
 * prompt's blocks until then), alone or beside a store that keeps the prompt for prefix reuse.
 * The store keys live in the namespace of {@code kv_transfer_params.transfer_id} when one is given, so the prefill
 * and decode halves of one proxied request agree on keys; with a key scheme that binds no namespace (vllm-v1), or
 * with {@link Builder#sharePrefixes}, they are the prompt's own, shared by every request with the same prefix. With
 * {@link Builder#prefixCache} the engine reuses its own cached chunks of a prompt and computes only the rest
 * ({@link PrefixCache}). With {@link Builder#saveDecodeKv} a decode engine saves each finished request's prompt and
 * answer chunks into the store ({@link DecodeKvSave}), so the conversation's next turn finds its answer's KV there.
 *
 * <p>Thread-safe: concurrent requests get their own blocks from the allocator (and share cached chunks read-only).
 * The engine owns its cache and frees it on {@link #close()}; the connector belongs to the caller.
 *
 * <p>Over 400 lines: one request's whole path (blocks, a load or the prefix cache, the prefill with its insert, the
 * decode, the blocks back) reads top to bottom here, and the builder checks every combination of roles, transports
 * and caches before any memory is allocated.
 */
public final class Engine implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Engine.class);
    private static final long HIDDEN_POOL_BYTES = 1L << 30;

    private final ModelConfig config;
    private final Transformer model;
    private final KVRole role;
    private final KVStoreConnector connector;
    /** The peer-to-peer transport, whose connector is {@link #connector}; null over a store. */
    private final P2pTransport p2p;
    /**
     * Whether the connector's objects carry the hidden states (kvc-v1's do, vllm-v1's do not, nor any with
     * {@link Builder#sharePrefixes}).
     */
    private final boolean hiddenStates;
    private final boolean namespaced;
    /** The engine's own prefix cache ({@link Builder#prefixCache}), or null. */
    private final PrefixCache prefixCache;
    /** The save of each finished request's decode KV ({@link Builder#saveDecodeKv}), or null. */
    private final DecodeKvSave decodeSave;
    private final boolean layerWise;
    private final PagedKVCache cache;
    private final BlockAllocator blocks;
    private final SegmentPool hiddenPool;
    /** {@link Builder#failPrefillAfterLayers}: the layers a prefill hands on before it fails; -1: never. */
    private final int failPrefillAfterLayers;
    private final String engineId = "demo-" + UUID.randomUUID().toString().substring(0, 8);
    private final LongAdder requests = new LongAdder();
    private final LongAdder promptTokens = new LongAdder();
    private final LongAdder prefillPasses = new LongAdder();
    private final LongAdder prefillTokens = new LongAdder();
    private final LongAdder decodeSteps = new LongAdder();
    private final LongAdder loaded = new LongAdder();
    private final LongAdder partial = new LongAdder();
    private final EnumMap<MissReason, LongAdder> misses = new EnumMap<>(MissReason.class);
    /** Layer-wise loads through the store that wait for their producer, for the proxy's give-up notices. */
    private final TransferNotices<DropSession> storeWaits = new TransferNotices<>();
    private final LongAdder loadFailures = new LongAdder();
    private final LongAdder inserts = new LongAdder();
    private final LongAdder insertFailures = new LongAdder();

    private Engine(Builder b) {
        this.config = b.weights.config();
        this.model = new Transformer(b.weights);
        this.role = b.role;
        this.cache = PagedKVCache.allocate(config.kvLayout(), b.cacheBlocks);
        this.p2p = b.p2pConfig == null ? null : openP2p(b.p2pConfig, cache);
        this.connector = p2p != null ? p2p.connector() : b.connector;
        this.hiddenStates = (connector == null || connector.holdsHiddenStates()) && !b.sharePrefixes;
        this.namespaced = (connector == null || connector.bindsNamespace()) && !b.sharePrefixes;
        this.layerWise = b.layerWise;
        this.blocks = new BlockAllocator(b.cacheBlocks);
        this.prefixCache = b.prefixChunkTokens == 0 ? null : new PrefixCache(blocks, b.prefixChunkTokens,
                ModelConfig.BLOCK_SIZE, KvcV1KeyScheme.rootHash(connector != null ? connector.keyContext()
                        : KeyContext.of(config.modelId(), config.kvLayout()), null), config.layers(),
                b.prefixEvents, b.prefixInstance);
        this.decodeSave = b.saveDecodeKv ? new DecodeKvSave(connector, config.layers()) : null;
        this.hiddenPool = new SegmentPool(HIDDEN_POOL_BYTES);
        this.failPrefillAfterLayers = b.failPrefillAfterLayers;
        for (MissReason r : MissReason.values()) {
            misses.put(r, new LongAdder());
        }
    }

    private P2pTransport openP2p(KvTransferConfig p2pConfig, PagedKVCache c) {
        try {
            return new P2pTransport(KVConnectors.open(p2pConfig, new ConnectorContext(config.kvLayout(),
                    config.modelId(), List.of(c))));
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    /** A builder for an engine running {@code weights}. */
    public static Builder builder(ModelWeights weights) {
        return new Builder(weights);
    }

    /** Generates {@code maxTokens} tokens greedily after {@code prompt}, with no transfer parameters. */
    public Generation generate(int[] prompt, int maxTokens) {
        return generate(prompt, maxTokens, null, t -> { });
    }

    /**
     * Generates {@code maxTokens} tokens greedily after {@code prompt}, handing each to {@code onToken} as soon as it
     * is known.
     *
     * @param params the request's {@code kv_transfer_params}, or null
     * @throws KVException {@code INVALID_ARGUMENT} for an empty prompt, a token outside the vocabulary or a request
     *     longer than the context; {@code BUSY} when the cache has too few free blocks
     */
    public Generation generate(int[] prompt, int maxTokens, KVTransferParams params, IntConsumer onToken) {
        return generate(prompt, maxTokens, params, t -> { }, onToken);
    }

    /**
     * As {@link #generate(int[], int, KVTransferParams, IntConsumer)}, and hands {@code onLoaded}, once and before
     * the first token, the prompt tokens whose KV this engine's drop-select loaded for the request: what it matched,
     * or 0 on a miss, a failed load (the prefill is recomputed) or no lookup (a producer, no connector). An engine
     * server reports it so a cache-aware proxy can check its prediction.
     */
    public Generation generate(int[] prompt, int maxTokens, KVTransferParams params, IntConsumer onLoaded,
                               IntConsumer onToken) {
        validate(prompt, maxTokens);
        requests.increment();
        promptTokens.add(prompt.length);
        String transferId = params == null ? null : params.transferId();
        if (transferId == null && role.produces() && params != null && Boolean.TRUE.equals(params.doRemoteDecode())) {
            // A NIXL-style proxy names no transfer: choose one and answer it, so the proxy forwards it to D.
            transferId = UUID.randomUUID().toString();
        }
        RequestTokens request = transferId == null || !namespaced ? RequestTokens.of(prompt)
                : RequestTokens.of(prompt).inNamespace(transferId);
        int totalBlocks = (prompt.length + maxTokens + ModelConfig.BLOCK_SIZE - 1) / ModelConfig.BLOCK_SIZE;
        PrefixCache.Hold hold = prefixCache == null ? PrefixCache.Hold.NONE : prefixCache.acquire(prompt);
        int[] ids;
        try {
            ids = prefixCache == null ? blocks.allocate(totalBlocks)
                    : prefixCache.allocate(totalBlocks - hold.blocks().length);
        } catch (KVException e) {
            if (prefixCache != null) {
                prefixCache.release(hold, new int[0]);
            }
            throw e;
        }
        P2pOutgoing toPeer = null;
        MemorySegment peerHidden = null;
        boolean finished = false;
        int[] out = new int[maxTokens];
        try {
            int[] tableIds = hold.blocks().length == 0 ? ids : concat(hold.blocks(), ids);
            BlockTable table = new BlockTable(tableIds, ModelConfig.BLOCK_SIZE, tableIds.length * ModelConfig.BLOCK_SIZE);
            Prefill p = role.consumes() && connector != null ? load(request, table, transferId, params)
                    : hold.tokens() > 0 ? new Prefill(hold.tokens(), null, -1, hold.tokens()) : Prefill.NONE;
            onLoaded.accept(p.loaded());
            int first = p.firstToken();
            boolean inserted = false;
            Generation.PrefillSource source = hold.tokens() > 0 ? Generation.PrefillSource.CACHED
                    : p.matched() == prompt.length ? Generation.PrefillSource.LOADED
                    : p.matched() > 0 ? Generation.PrefillSource.PARTIAL : Generation.PrefillSource.COMPUTED;
            if (source != Generation.PrefillSource.LOADED) {
                if (p2p != null && role.produces() && p.matched() == 0 && request.namespace() != null) {
                    toPeer = p2p.beginPrefill(request.namespace(), prompt, cache, table);
                }
                Computed c = computePrefill(prompt, p.matched(), hold.tokens() > 0, table, request, toPeer);
                first = c.firstToken();
                inserted = c.inserted();
                peerHidden = c.peerHidden();
            }
            out[0] = first;
            onToken.accept(first);
            int next = first;
            for (int i = 1; i < maxTokens; i++) {
                float[] hidden = model.forward(new int[] {next}, prompt.length + i - 1, cache, table, null);
                decodeSteps.increment();
                next = Kernels.argmax(model.logits(hidden, 0));
                out[i] = next;
                onToken.accept(next);
            }
            if (decodeSave != null) {
                // The last generated token is never fed back, so its KV was never written.
                decodeSave.save(concat(prompt, out), prompt.length + maxTokens - 1, cache, table);
            }
            KVTransferParams answer = role.produces() && connector != null ? KVTransferParams.builder()
                    .transferId(transferId).doRemotePrefill(inserted).doRemoteDecode(false).remoteEngineId(engineId)
                    .tpSize(1).build() : null;
            finished = true;
            return new Generation(out, prompt.length, source, p.missReason(), answer);
        } finally {
            if (prefixCache != null && finished) {
                // The last generated token is never fed back, so its KV was never written.
                prefixCache.finish(hold, concat(prompt, out), prompt.length + maxTokens - 1, ids);
            } else if (prefixCache != null) {
                prefixCache.release(hold, ids);
            } else if (toPeer == null) {
                blocks.free(ids);
            } else {
                MemorySegment h = peerHidden;
                // The transfer may still read the blocks: they go back when it is done with them too.
                toPeer.engineDone(() -> {
                    blocks.free(ids);
                    if (h != null) {
                        hiddenPool.release(h);
                    }
                });
            }
        }
    }

    private static int[] concat(int[] a, int[] b) {
        int[] r = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, r, a.length, b.length);
        return r;
    }

    private void validate(int[] prompt, int maxTokens) {
        if (prompt == null || prompt.length == 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the prompt is empty").operation("generate").build();
        }
        if (maxTokens < 1) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "max_tokens is " + maxTokens + ", need at least 1")
                    .operation("generate").build();
        }
        if ((long) prompt.length + maxTokens > config.maxContext()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, prompt.length + " prompt tokens + " + maxTokens
                    + " max_tokens exceed the context of " + config.maxContext() + " tokens").operation("generate")
                    .build();
        }
        for (int i = 0; i < prompt.length; i++) {
            if (prompt[i] < 0 || prompt[i] >= config.vocabSize()) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "prompt token " + i + " is " + prompt[i]
                        + ", outside the vocabulary 0.." + (config.vocabSize() - 1)).operation("generate").build();
            }
        }
    }

    /**
     * What the store supplied: the prompt tokens whose KV is now in the cache, why nothing was (or null), the
     * first generated token when every prompt token was loaded (otherwise -1), and the tokens the drop-select
     * matched ({@code matched} may be one fewer, when the last one is recomputed for want of its hidden state).
     */
    private record Prefill(int matched, MissReason missReason, int firstToken, int loaded) {
        static final Prefill NONE = new Prefill(0, null, -1, 0);
    }

    /**
     * Drop-selects the prompt's KV, and its hidden states where the connector's objects hold them. Without them
     * (vllm-v1) the first generated token needs the last prompt position's output, so the last prompt token is
     * recomputed, as vLLM does; a load of every full block counts as complete, since only full blocks are stored.
     */
    private Prefill load(RequestTokens request, BlockTable table, String transferId, KVTransferParams params) {
        int tokens = request.totalTokens();
        // Given up: the proxy found no P for this request, so no producer will write it; a load waits for none and
        // reads what the store has committed (an earlier request's prefix).
        boolean waitForProducer = layerWise && !P2pTransport.givenUp(params);
        int h = config.hiddenSize();
        long hiddenBytes = (long) tokens * h * Float.BYTES;
        MemorySegment hidden = hiddenStates ? hiddenPool.acquire(hiddenBytes) : null;
        try {
            DropTarget target = DropTarget.paged(cache, table);
            if (hidden != null) {
                target = target.withHidden(Tensor.host(TensorSpec.of(DType.FP32, tokens, h),
                        hidden.asSlice(0, hiddenBytes)));
            }
            DropResult r = p2p != null ? p2p.receive(request, target, params, config.layers(), l -> { })
                    : waitForProducer ? loadLayerWise(request, target, transferId)
                    : connector.dropSelect(request, target);
            if (hidden == null && r.isHit()) {
                int loadable = tokens - tokens % connector.keyContext().chunkTokens();
                (r.matchedTokens() >= loadable ? loaded : partial).increment();
                return new Prefill(Math.min(r.matchedTokens(), tokens - 1), null, -1, r.matchedTokens());
            }
            if (r.isComplete()) {
                loaded.increment();
                float[] last = new float[h];
                MemorySegment.copy(hidden, ValueLayout.JAVA_FLOAT, (long) (tokens - 1) * h * Float.BYTES, last, 0, h);
                return new Prefill(tokens, null, Kernels.argmax(model.logits(last, 0)), tokens);
            }
            if (r.isHit()) {
                partial.increment();
                LOG.info("transfer {}: loaded {} of {} prompt tokens from {}; computing the other {}", transferId,
                        r.matchedTokens(), tokens, connector.endpoint(), tokens - r.matchedTokens());
                return new Prefill(r.matchedTokens(), null, -1, r.matchedTokens());
            }
            MissReason reason = r.reason() == null ? MissReason.ABSENT : r.reason();
            misses.get(reason).increment();
            LOG.info("transfer {}: KV miss {} for {} prompt tokens ({}); recomputing the prefill", transferId, reason,
                    tokens, r.detail());
            return new Prefill(0, reason, -1, 0);
        } catch (KVException e) {
            loadFailures.increment();
            LOG.warn("transfer {}: loading KV from {} failed; recomputing the prefill: {}", transferId,
                    connector.endpoint(), e.getMessage());
            return Prefill.NONE;
        } finally {
            if (hidden != null) {
                hiddenPool.release(hidden);
            }
        }
    }

    private DropResult loadLayerWise(RequestTokens request, DropTarget target, String transferId) {
        try (DropSession s = connector.beginDropSelect(request, target)) {
            // Only a move or a give-up is ever noticed, and a move needs nothing here: a held notice is a give-up.
            if (transferId != null && storeWaits.began(transferId, s) != null) {
                s.abandon("the proxy gave up the prefill of transfer " + transferId + " before this load began");
            }
            String why = "its request ended";
            try {
                for (int l = 0; l < config.layers(); l++) {
                    // Nothing to overlap with on a full hit, but a real engine would run layer l here.
                    if (!s.awaitLayer(l)) {
                        break;
                    }
                }
                DropResult r = s.result();
                why = r.isHit() ? "its KV was loaded" : "it missed (" + r.reason() + ")";
                return r;
            } finally {
                if (transferId != null) {
                    storeWaits.ended(transferId, s, why);
                }
            }
        }
    }

    /**
     * Computes prompt positions {@code [from, T)} and, when this engine produces, inserts the whole prompt: when it
     * computes all of it, or when {@code [0, from)} came from its own prefix cache (then it has no hidden states of
     * those tokens, and inserts none). A prefix loaded from the store is not inserted again. The insert goes into the
     * store layer by layer, or peer to peer through {@code toPeer}, which sends each layer to D as soon as D's
     * destination is there.
     */
    private Computed computePrefill(int[] prompt, int from, boolean fromOwnCache, BlockTable table,
                                    RequestTokens request, P2pOutgoing toPeer) {
        int[] rest = Arrays.copyOfRange(prompt, from, prompt.length);
        InsertSession session = role.produces() && connector != null && p2p == null && (from == 0 || fromOwnCache)
                ? beginInsert(request) : null;
        LayerInserter inserter = session == null ? null : new LayerInserter(session, table);
        float[] hidden;
        IntConsumer onLayer = toPeer != null ? toPeer::layerComputed : inserter;
        try {
            hidden = model.forward(rest, from, cache, table, failPrefillAfterLayers < 0 ? onLayer
                    : failingAfter(onLayer));
        } catch (RuntimeException e) {
            if (session != null) {
                abortQuietly(session);
            }
            if (toPeer != null) {
                toPeer.prefillFailed(e);
            }
            throw e;
        }
        prefillPasses.increment();
        prefillTokens.add(rest.length);
        boolean inserted = inserter != null && !inserter.failed && finishInsert(session, hidden, prompt.length);
        MemorySegment peerHidden = null;
        if (toPeer != null) {
            Tensor states = null;
            if (hiddenStates) {
                int h = config.hiddenSize();
                long bytes = (long) prompt.length * h * Float.BYTES;
                peerHidden = hiddenPool.acquire(bytes);
                MemorySegment.copy(hidden, 0, peerHidden, ValueLayout.JAVA_FLOAT, 0, prompt.length * h);
                states = Tensor.host(TensorSpec.of(DType.FP32, prompt.length, h), peerHidden.asSlice(0, bytes));
            }
            toPeer.prefillEnded(states);
        }
        return new Computed(Kernels.argmax(model.logits(hidden, rest.length - 1)), inserted || toPeer != null,
                peerHidden);
    }

    /** {@code onLayer} (null for none) for the first {@link #failPrefillAfterLayers} layers, then a failure. */
    private IntConsumer failingAfter(IntConsumer onLayer) {
        return layer -> {
            if (layer >= failPrefillAfterLayers) {
                throw KVException.of(ErrorCode.INTERNAL, "engine " + engineId + ": the prefill failed at layer "
                        + layer + " on purpose (Engine.Builder.failPrefillAfterLayers, a test hook)")
                        .operation("prefill").build();
            }
            if (onLayer != null) {
                onLayer.accept(layer);
            }
        };
    }

    /**
     * A computed prefill: the first generated token, whether its KV was inserted and committed (or, peer to peer,
     * goes to D), and the copy of its hidden states kept for D (pooled; null when none).
     */
    private record Computed(int firstToken, boolean inserted, MemorySegment peerHidden) {
    }

    /**
     * P, peer to peer: D's destination for a transfer; its layers go there as this engine computes them.
     *
     * @return bytes of KV written when the prefill had ended (the transfer is done), or -1 when the prefill carries it
     * @throws KVException {@code UNSUPPORTED} when this engine moves KV through a store; {@link P2pTransport#destination}'s
     */
    public long sendToPeer(KVTransferParams destination) {
        if (p2p == null) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "engine " + engineId + " moves KV through a store, not peer "
                    + "to peer").operation("p2p send").hint("start the engine with --transport p2p").build();
        }
        return p2p.destination(destination);
    }

    /**
     * Whether this engine is a D that loads layer-wise through a store: its loads wait for their producer, and a
     * prefill retried on another P writes the store under the same transfer id, so there is nothing to move.
     */
    public boolean loadsLayerWiseThroughStore() {
        return p2p == null && role.consumes() && layerWise && connector != null;
    }

    /**
     * D: the proxy retried the prefill of {@code notice}'s {@code transfer_id} on the P at its
     * {@code remote_host}/{@code remote_port} ({@link P2pTransport#prefillMoved}), or, with
     * {@value P2pTransport#ABANDONED_FIELD} true, gave it up: a load waiting for it (peer to peer,
     * {@link P2pTransport#prefillAbandoned}, or layer-wise through the store) misses at once and the engine recomputes.
     *
     * @return the first layer the new P writes (0 for a prefill given up), or -1 when the notice is held for a request
     *     not begun yet
     * @throws KVException {@code UNSUPPORTED} when this engine loads no KV peer to peer (nor, for a prefill given up,
     *     layer-wise through a store); {@code CLOSED} naming the transfer when D's request for it has ended; those of
     *     {@link P2pTransport#prefillMoved} and {@link P2pTransport#prefillAbandoned}
     */
    public int prefillMoved(KVTransferParams notice) {
        boolean givenUp = P2pTransport.givenUp(notice);
        if (givenUp && loadsLayerWiseThroughStore()) {
            if (notice.transferId() == null || notice.transferId().isEmpty()) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a notice that the prefill was given up needs its "
                        + "transfer_id").operation("prefill abandoned").build();
            }
            DropSession waiting = storeWaits.waitingOrHold(notice.transferId(), TransferNotices.Notice.GIVEN_UP);
            if (waiting == null) {
                return -1;
            }
            waiting.abandon("the proxy gave up the prefill of transfer " + notice.transferId() + " (every P it tried "
                    + "failed)");
            return 0;
        }
        if (p2p == null || !role.consumes()) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "engine " + engineId + " (" + role.vllmName() + ") loads no "
                    + "KV peer to peer: transfer " + notice.transferId() + " has no drop-select here to move")
                    .operation("p2p prefill moved").key(notice.transferId())
                    .hint("send the notice to a decode engine started with --transport p2p").build();
        }
        if (givenUp) {
            return p2p.prefillAbandoned(notice.transferId()) ? 0 : -1;
        }
        return p2p.prefillMoved(notice.transferId(), notice.remoteHost(), notice.remotePort());
    }

    /** The connectors by transport ({@code p2p}, {@code store}) of a peer-to-peer engine; empty otherwise. */
    public SequencedMap<String, KVStoreConnector> transports() {
        return p2p == null ? Collections.emptySortedMap() : p2p.transports();
    }

    /** Puts each layer as the forward pass finishes its K and V; a failed put aborts the insert, not the request. */
    private final class LayerInserter implements IntConsumer {
        private final InsertSession session;
        private final BlockTable table;
        private boolean failed;

        LayerInserter(InsertSession session, BlockTable table) {
            this.session = session;
            this.table = table;
        }

        @Override
        public void accept(int layer) {
            if (failed) {
                return;
            }
            try {
                session.putLayer(layer, cache, table);
            } catch (KVException e) {
                failed = true;
                insertFailures.increment();
                LOG.warn("inserting layer {} of {} prompt tokens into {} failed; serving without the insert: {}", layer,
                        session.tokens(), connector.endpoint(), e.getMessage());
                abortQuietly(session);
            }
        }
    }

    /** Aborts an insert whose store may be the reason it failed; a failing cleanup must not fail the request. */
    private void abortQuietly(InsertSession session) {
        try {
            session.close();
        } catch (KVException e) {
            LOG.warn("aborting the insert into {} left objects behind (they expire with the store's TTL): {}",
                    connector.endpoint(), e.getMessage());
        }
    }

    private InsertSession beginInsert(RequestTokens request) {
        try {
            return connector.beginInsert(request);
        } catch (KVException e) {
            insertFailures.increment();
            LOG.warn("cannot begin an insert into {}; serving without it: {}", connector.endpoint(), e.getMessage());
            return null;
        }
    }

    /** Puts the hidden states and commits; false (logged, counted) when the store failed. */
    private boolean finishInsert(InsertSession insert, float[] hidden, int tokens) {
        int h = config.hiddenSize();
        long bytes = (long) tokens * h * Float.BYTES;
        MemorySegment seg = hiddenPool.acquire(bytes);
        try (insert) {
            if (hiddenStates) {
                MemorySegment.copy(hidden, 0, seg, ValueLayout.JAVA_FLOAT, 0, tokens * h);
                insert.putHidden(Tensor.host(TensorSpec.of(DType.FP32, tokens, h), seg.asSlice(0, bytes)));
            }
            insert.commit();
            inserts.increment();
            return true;
        } catch (KVException e) {
            insertFailures.increment();
            LOG.warn("inserting {} prompt tokens into {} failed; the decode side will recompute: {}", tokens,
                    connector.endpoint(), e.getMessage());
            return false;
        } finally {
            hiddenPool.release(seg);
        }
    }

    /** Counters since the engine started. */
    public EngineMetrics metrics() {
        Map<MissReason, Long> m = new EnumMap<>(MissReason.class);
        misses.forEach((k, v) -> m.put(k, v.sum()));
        return new EngineMetrics(requests.sum(), promptTokens.sum(), prefillPasses.sum(), prefillTokens.sum(),
                decodeSteps.sum(), loaded.sum(), partial.sum(), Collections.unmodifiableMap(m), loadFailures.sum(),
                inserts.sum(), insertFailures.sum());
    }

    /** The decode saves' counters, or null when the engine saves none ({@link Builder#saveDecodeKv}). */
    public DecodeSaveStats decodeSaveStats() {
        return decodeSave == null ? null : decodeSave.stats();
    }

    /** The own prefix cache's counters, or null when the engine keeps none ({@link Builder#prefixCache}). */
    public PrefixCacheStats prefixCacheStats() {
        return prefixCache == null ? null : prefixCache.stats();
    }

    /** The model's config. */
    public ModelConfig config() {
        return config;
    }

    /** The role. */
    public KVRole role() {
        return role;
    }

    /** The connector, or null for a plain engine. */
    public KVStoreConnector connector() {
        return connector;
    }

    /** This engine's id, answered as {@code remote_engine_id}. */
    public String engineId() {
        return engineId;
    }

    /** Blocks of the paged cache free now (blocks the prefix cache holds are not free). */
    public int freeBlocks() {
        return blocks.freeBlocks();
    }

    /** Frees the paged cache and the hidden-state pool; the connector stays open. */
    @Override
    public void close() {
        try {
            if (p2p != null) {
                p2p.close();
            }
        } finally {
            cache.close();
            hiddenPool.close();
        }
    }

    /** Configures an {@link Engine}. */
    public static final class Builder {
        private final ModelWeights weights;
        private KVRole role = KVRole.NONE;
        private KVStoreConnector connector;
        private boolean layerWise;
        private int cacheBlocks;
        private KvTransferConfig p2pConfig;
        private int prefixChunkTokens;
        private KvEventListener prefixEvents;
        private String prefixInstance;
        private boolean sharePrefixes;
        private boolean saveDecodeKv;
        private int failPrefillAfterLayers = -1;

        private Builder(ModelWeights weights) {
            this.weights = weights;
            this.cacheBlocks = 4 * ((weights.config().maxContext() + ModelConfig.BLOCK_SIZE - 1)
                    / ModelConfig.BLOCK_SIZE);
        }

        /** The role and the connector it uses (null only with {@link KVRole#NONE}). */
        public Builder role(KVRole r, KVStoreConnector c) {
            this.role = r;
            this.connector = c;
            return this;
        }

        /** Whether a consumer loads layer by layer, as the producer stores them (default false: after the commit). */
        public Builder layerWise(boolean on) {
            this.layerWise = on;
            return this;
        }


        /**
         * Moves KV peer to peer through the connector {@code kvTransferConfig} names, built with the engine's cache
         * registered ({@link KVConnectors}): a {@code TransferEngineConnector}, or a {@code MultiConnector} of one
         * and a store connector ({@link P2pTransport#kvTransferConfig}); the role's connector is then null.
         */
        public Builder p2p(KvTransferConfig kvTransferConfig) {
            this.p2pConfig = kvTransferConfig;
            return this;
        }

        /**
         * Keeps the full chunks of finished requests in the paged cache, indexed by their kvc-v1 chunk hash, for later
         * prompts that start with them ({@link PrefixCache}: vLLM's automatic prefix caching, LRU-evicted when blocks
         * are needed), and reports what it caches and evicts to {@code events} (null for none) as {@code instance}.
         * For an engine that computes its prompts (a producer, or role none); a consumer loads them from the store.
         *
         * @param chunkTokens tokens per cached chunk: a multiple of {@value ModelConfig#BLOCK_SIZE}, and the
         *                    connector's chunk size when there is a connector (so its hashes are the store's); 0: off
         */
        public Builder prefixCache(int chunkTokens, KvEventListener events, String instance) {
            this.prefixChunkTokens = chunkTokens;
            this.prefixEvents = events;
            this.prefixInstance = instance;
            return this;
        }

        /**
         * Store keys that bind no transfer id, so every request with a prefix shares its objects (kvc-v1's keys are
         * then content-addressed by the prompt alone), and no hidden states: a producer that reused its own cache
         * has none of the tokens it did not compute, so a consumer computes the last prompt token itself, as with
         * vllm-v1. The connector should retain what it loads ({@code DropMode.RETAIN}). Default false.
         */
        public Builder sharePrefixes(boolean on) {
            this.sharePrefixes = on;
            return this;
        }

        /**
         * A decode engine saves each finished request's KV, prompt and generated tokens, into the store under the keys
         * a producer uses ({@link DecodeKvSave}: the full chunks up to the last generated token, skipped when the store
         * holds them all), and its connector tells its listener, so a cache-aware proxy learns that the store holds
         * the conversation with its last answer. For a consumer over a store whose keys bind no transfer id and whose
         * objects hold no hidden states: {@link #sharePrefixes}, or a scheme such as vllm-v1. Default false.
         */
        public Builder saveDecodeKv(boolean on) {
            this.saveDecodeKv = on;
            return this;
        }

        private void checkDecodeSave() {
            if (!role.consumes()) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "role " + role.vllmName() + " decodes no prompt it "
                        + "loaded; saving the decode KV is for a decode engine").hint("use it with kv_consumer or "
                        + "kv_both (--role), or drop --save-decode-kv").build();
            }
            if (p2pConfig != null) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "saving the decode KV needs a store; peer-to-peer "
                        + "transfers keep nothing after the request").hint("use --transport store").build();
            }
            if (!sharePrefixes && (connector.bindsNamespace() || connector.holdsHiddenStates())) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "saving the decode KV into " + connector.endpoint()
                        + " needs keys without the request's transfer id and objects without hidden states, so a "
                        + "later prompt that extends this one finds them; this connector's keys and objects carry them")
                        .hint("use sharePrefixes (--share-prefixes)").build();
            }
        }

        /**
         * A test hook, for failures mid-prefill: every prefill this engine computes hands on (to the store or D) the
         * KV of its first {@code layers} layers, then fails with {@code INTERNAL} naming this hook, as an engine
         * whose forward pass breaks mid-prompt; an engine server answers it 500. Default -1: never.
         */
        Builder failPrefillAfterLayers(int layers) {
            this.failPrefillAfterLayers = layers;
            return this;
        }

        /** Blocks of {@value ModelConfig#BLOCK_SIZE} tokens in the paged cache (default: 4 full contexts). */
        public Builder cacheBlocks(int n) {
            this.cacheBlocks = n;
            return this;
        }

        private void checkPrefixCache(int connectorChunkTokens, boolean connectorHidden) {
            PrefixCache.checkChunk(prefixChunkTokens, ModelConfig.BLOCK_SIZE);
            if (role.consumes()) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "role " + role.vllmName() + " loads its prompts from "
                        + "the store; the prefix cache is for engines that compute them")
                        .hint("use the prefix cache with kv_producer or none").build();
            }
            if (p2pConfig != null) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "the prefix cache and peer-to-peer transfers cannot "
                        + "share blocks yet: P holds a prompt's blocks until D takes them").build();
            }
            if (connectorChunkTokens != 0 && connectorChunkTokens != prefixChunkTokens) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "the prefix cache's chunks of " + prefixChunkTokens
                        + " tokens differ from the connector's " + connectorChunkTokens + ": their hashes would not"
                        + " name the same chunks").hint("give both the same chunk size").build();
            }
            if (role.produces() && connectorHidden && !sharePrefixes) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "a producer that reuses its own cache has no hidden "
                        + "states of the tokens it did not compute, and its connector's objects carry them")
                        .hint("use sharePrefixes (--share-prefixes), or a key scheme without hidden states").build();
            }
        }

        /** Builds the engine and allocates its cache. */
        public Engine build() {
            if (role != KVRole.NONE && connector == null && p2pConfig == null) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "role " + role.vllmName() + " needs a connector")
                        .hint("give a store URI (--store), or use role none").build();
            }
            if (connector != null) {
                KVLayout want = weights.config().kvLayout();
                if (!connector.layout().canonicalString().equals(want.canonicalString())) {
                    throw KVException.of(ErrorCode.INVALID_CONFIG, "the connector's layout "
                            + connector.layout().canonicalString() + " is not the model's " + want.canonicalString())
                            .hint("build the connector with ModelConfig.kvLayout()").build();
                }
            }
            if (prefixChunkTokens != 0) {
                checkPrefixCache(connector == null ? 0 : connector.keyContext().chunkTokens(),
                        connector != null && connector.holdsHiddenStates());
            }
            if (saveDecodeKv) {
                checkDecodeSave();
            }
            if (cacheBlocks < 1) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cacheBlocks " + cacheBlocks + " must be >= 1").build();
            }
            return new Engine(this);
        }
    }
}
