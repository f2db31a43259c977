package dev.kvconnector.demo;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.multi.MultiConnector;
import dev.kvconnector.connector.spi.StoreConnectorProvider;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.mooncake.p2p.P2pDestination;
import dev.kvconnector.mooncake.p2p.P2pDropSession;
import dev.kvconnector.mooncake.p2p.TransferEngineConnector;
import dev.kvconnector.mooncake.p2p.TransferEngineConnectorProvider;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The demo's peer-to-peer transport ({@code --transport p2p}, and {@code p2p+store}): KV moves from P's cache
 * straight into D's through a {@link TransferEngineConnector}, as vLLM V1's Mooncake and NIXL connectors do, in
 * the proxy's v1 and concurrent flows.
 *
 * <ol>
 *   <li>D learns where P is from its {@code kv_transfer_params} ({@code remote_host}/{@code remote_port}: P's
 *       answer in v1, the proxy in the concurrent flow), begins its drop-select (its blocks registered and
 *       reserved) and sends its destination, {@link P2pDropSession#transferParams()}, to P's
 *       {@code POST /kv/p2p/send}; it then accepts each layer as it lands ({@link #receive}).</li>
 *   <li>P's prefill ({@link #beginPrefill}) and D's destination ({@link #destination}) meet in a {@link P2pOutgoing}
 *       per transfer id, whichever comes first: once both are there, P writes every layer already computed, then
 *       each later one as soon as it is computed, then the hidden states, and commits. In v1 the prefill has ended
 *       when the destination comes; in the concurrent flow it usually arrives first, and D's {@code awaitLayer(i)}
 *       returns while P computes later layers.</li>
 *   <li>P's blocks go back to the engine when both the engine and the transfer are done with them. A prefill no D
 *       asks for, and a destination no prefill comes for, are dropped after {@link #HOLD_NANOS} (checked whenever
 *       a transfer begins).</li>
 *   <li>When the proxy's concurrent flow retries the prefill on another P, it tells D ({@link #PREFILL_PATH},
 *       {@link #prefillMoved}): D moves its drop-select to that P ({@link P2pDropSession#moveProducer}) and sends
 *       it its destination from the next layer it awaits on, so the layers it accepted stay and the new P writes the
 *       others. A notice that comes before D's request began is held for {@link TransferNotices#HOLD_NANOS} (at most
 *       {@link TransferNotices#HELD_MAX}), and the request then asks the new P straight away. When the proxy says the prefill
 *       may move ({@link #MAY_MOVE_FIELD}), an abort from P leaves D waiting for the next P, up to its layer
 *       timeout, instead of recomputing at once; when the proxy gives the prefill up ({@link #prefillAbandoned}),
 *       D recomputes at once.</li>
 * </ol>
 *
 * <p>With {@code p2p+store} the connector is a {@link MultiConnector} of the P2P connector and a store connector
 * ({@link #kvTransferConfig}, built by the connector providers): P's insert goes into both, so the store keeps the
 * prompt for prefix reuse; D takes the request in flight from P, and loads a request that names no P (such as one
 * sent to D alone) from the store.
 */
public final class P2pTransport implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(P2pTransport.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    /** How long P keeps a prefilled request for D, and a destination for its prefill, in ns: 60 s. */
    static final long HOLD_NANOS = 60_000_000_000L;
    /** P's endpoint that takes D's destination. */
    public static final String SEND_PATH = "/kv/p2p/send";
    /** D's endpoint that takes the proxy's notice that a transfer's prefill moved to another P. */
    public static final String PREFILL_PATH = "/kv/p2p/prefill";
    /**
     * The field of D's {@code kv_transfer_params} by which the proxy says that it may retry the prefill on another
     * P and tell D ({@value #PREFILL_PATH}); true or absent.
     */
    public static final String MAY_MOVE_FIELD = "kvc_prefill_may_move";
    /** The field of a notice to {@value #PREFILL_PATH} saying that the proxy gave the prefill up; true or absent. */
    public static final String ABANDONED_FIELD = "kvc_prefill_abandoned";

    private final KVStoreConnector connector;
    private final TransferEngineConnector p2p;
    /** The composite's store connector, for loads without a P; null for P2P alone. */
    private final KVStoreConnector store;
    private final Map<String, P2pOutgoing> outgoing = new ConcurrentHashMap<>();
    /** D: the drop-selects waiting for a P, and the proxy's notices about their prefills. */
    private final TransferNotices<P2pDropSession> incoming = new TransferNotices<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /**
     * Takes {@code connector}, which it closes: a {@link TransferEngineConnector}, or a {@link MultiConnector} of
     * one and a store connector, in that order.
     *
     * @throws KVException {@code INVALID_CONFIG} for any other connector, or a store whose keys bind a namespace
     *     (kvc-v1), which could serve no other request (the connector is closed)
     */
    public P2pTransport(KVStoreConnector connector) {
        this.connector = connector;
        if (connector instanceof TransferEngineConnector t) {
            this.p2p = t;
            this.store = null;
        } else if (connector instanceof MultiConnector m && m.connectors().size() == 2
                && m.connectors().getFirst() instanceof TransferEngineConnector t) {
            this.p2p = t;
            this.store = m.connectors().get(1);
        } else {
            connector.close();
            throw KVException.of(ErrorCode.INVALID_CONFIG, "a peer-to-peer engine needs a "
                    + TransferEngineConnectorProvider.NAME + ", or a " + MultiConnector.NAME + " of one and a store "
                    + "connector; the configuration built " + connector.endpoint()).build();
        }
        if (store != null && store.bindsNamespace()) {
            connector.close();
            throw KVException.of(ErrorCode.INVALID_CONFIG, "the store beside peer to peer keeps prompts for prefix "
                    + "reuse, but its key scheme binds each transfer's id: no other request could use its objects, "
                    + "and nothing would consume them").hint("use a scheme without namespace, such as vllm-v1")
                    .build();
        }
    }

    /**
     * The {@code kv_transfer_config} of {@code --transport p2p} ({@code storeUri} null) or {@code p2p+store}, in
     * vLLM's form: a {@code TransferEngineConnector} on {@code engineUri}, alone or first in a
     * {@code MultiConnector} with a {@code StoreConnector} on {@code storeUri} with the key {@code scheme}.
     */
    public static KvTransferConfig kvTransferConfig(KVRole role, String engineUri, long layerTimeoutMillis,
                                                    String storeUri, String scheme) {
        ObjectNode p2pConfig = entry(role, TransferEngineConnectorProvider.NAME);
        p2pConfig.putObject("kv_connector_extra_config").put(TransferEngineConnectorProvider.ENGINE_URI, engineUri)
                .put("layer_timeout_ms", layerTimeoutMillis).put("staging_bytes", 64L << 20);
        if (storeUri == null) {
            return KvTransferConfig.fromJsonNode(p2pConfig);
        }
        ObjectNode storeConfig = entry(role, StoreConnectorProvider.NAME);
        storeConfig.putObject("kv_connector_extra_config").put(StoreConnectorProvider.STORE_URI, storeUri)
                .put(StoreConnectorProvider.KEY_SCHEME, scheme).put("layer_timeout_ms", layerTimeoutMillis);
        ObjectNode multi = entry(role, MultiConnector.NAME);
        ArrayNode list = multi.putObject("kv_connector_extra_config").putArray(MultiConnector.CONNECTORS);
        list.add(p2pConfig);
        list.add(storeConfig);
        return KvTransferConfig.fromJsonNode(multi);
    }

    private static ObjectNode entry(KVRole role, String name) {
        return JSON.createObjectNode().put("kv_connector", name).put("kv_role", role.vllmName());
    }

    /** The connector the engine inserts into and reports: the P2P connector, or the composite. */
    public KVStoreConnector connector() {
        return connector;
    }

    /** The connectors by transport, {@code p2p} and, with a store, {@code store}, for per-transport metrics. */
    public SequencedMap<String, KVStoreConnector> transports() {
        SequencedMap<String, KVStoreConnector> m = new LinkedHashMap<>();
        m.put("p2p", p2p);
        if (store != null) {
            m.put("store", store);
        }
        return Collections.unmodifiableSequencedMap(m);
    }

    /**
     * P: a prefill of {@code prompt} into {@code table} of {@code cache} begins for transfer {@code transferId}; the
     * engine reports each layer computed, the end of the prefill and, last, that it is done with the blocks.
     */
    P2pOutgoing beginPrefill(String transferId, int[] prompt, PagedKVCache cache, BlockTable table) {
        expire();
        P2pOutgoing o;
        do {
            o = outgoing.computeIfAbsent(transferId, this::newOutgoing);
        } while (!o.prefill(prompt, cache, table));
        return o;
    }

    /**
     * P: D's destination for a transfer, checked against the layout at once; the layers go there as soon as its
     * prefill has computed them.
     *
     * @return bytes of KV written when the transfer ended here (its prefill had ended), or -1 when P's prefill
     *     carries it on (it is computing, or has not begun)
     * @throws KVException {@code INVALID_ARGUMENT} for params that are no destination or a transfer that already
     *     has one, {@code SHAPE_MISMATCH} or {@code INVALID_CONFIG} for a destination that does not fit; the
     *     connector's errors when writing fails
     */
    public long destination(KVTransferParams params) {
        P2pDestination.fromParams(params).check(connector.layout(), connector.endpoint());
        expire();
        P2pOutgoing o;
        do {
            o = outgoing.computeIfAbsent(params.transferId(), this::newOutgoing);
        } while (!o.destination(params));
        return o.writeFromDestination();
    }

    private P2pOutgoing newOutgoing(String transferId) {
        return new P2pOutgoing(transferId, p2p, connector, outgoing);
    }

    /** Drops what waited longer than {@link #HOLD_NANOS} and is not being written. */
    private void expire() {
        long now = System.nanoTime();
        for (P2pOutgoing o : List.copyOf(outgoing.values())) {
            o.expireIfIdle(now);
        }
    }

    /**
     * D: loads the request. When {@code params} name a P ({@code remote_host} and {@code remote_port}) and a
     * transfer id, the KV comes from that P: D begins the drop-select, sends its destination to P's
     * {@value #SEND_PATH} and waits layer by layer (a P that cannot be told ends it as a {@code TIMED_OUT} miss
     * after the connector's layer timeout). While it waits, the proxy may move the prefill to another P
     * ({@link #prefillMoved}) or give it up ({@link #prefillAbandoned}); a notice held for the transfer is applied as
     * it begins. Otherwise it comes from the store, when there is one, else it is an {@code ABSENT} miss.
     *
     * @param onLayer called with each layer accepted from P, in order (where an engine would compute)
     */
    DropResult receive(RequestTokens request, DropTarget target, KVTransferParams params, int layers,
                       IntConsumer onLayer) {
        if (params != null && params.remoteHost() != null && params.remotePort() != null
                && request.namespace() != null) {
            return fromPeer(request, target, params, layers, onLayer);
        }
        if (store != null) {
            return store.dropSelect(store.bindsNamespace() ? request : request.inNamespace(null), target);
        }
        return DropResult.miss(request.totalTokens(), MissReason.ABSENT, "transfer " + request.namespace()
                + ": kv_transfer_params name no remote_host/remote_port of a P to ask, and there is no store");
    }

    private DropResult fromPeer(RequestTokens request, DropTarget target, KVTransferParams fromProxy, int layers,
                                IntConsumer onLayer) {
        String tid = request.namespace();
        try (P2pDropSession drop = p2p.beginDropSelect(request, target)) {
            if (mayMove(fromProxy)) {
                drop.producerMayMove();
            }
            TransferNotices.Notice moved = incoming.began(tid, drop);
            String why = "its request ended";
            try {
                if (moved != null && moved.givenUp()) {
                    drop.abandon("the proxy gave up the prefill before this request began");
                } else if (moved != null) {
                    LOG.info("transfer {}: the prefill moved to {}:{} before this request began; asking it",
                            tid, moved.host(), moved.port());
                    sendDestination(tid, moved.host(), moved.port(), drop.transferParams());
                } else {
                    sendDestination(tid, fromProxy.remoteHost(), fromProxy.remotePort(), drop.transferParams());
                }
                for (int l = 0; l < layers && drop.awaitLayer(l); l++) {
                    onLayer.accept(l);
                }
                DropResult r = drop.result();
                why = r.isHit() ? "its KV was loaded" : "it missed (" + r.reason() + ")";
                return r;
            } finally {
                incoming.ended(tid, drop, why);
            }
        }
    }

    private static boolean mayMove(KVTransferParams params) {
        return flag(params, MAY_MOVE_FIELD);
    }

    /** Whether {@code params} (D's request's, or a notice) say that the proxy gave the prefill up. */
    static boolean givenUp(KVTransferParams params) {
        return params != null && flag(params, ABANDONED_FIELD);
    }

    private static boolean flag(KVTransferParams params, String field) {
        var f = params.unknownFields().get(field);
        return f != null && f.asBoolean(false);
    }

    /** Posts D's destination to P's {@value #SEND_PATH}, not waiting: a P that cannot be told leaves D to time out. */
    private void sendDestination(String tid, String host, int port, KVTransferParams destination) {
        URI p = URI.create("http://" + host + ":" + port + SEND_PATH);
        http.sendAsync(HttpRequest.newBuilder(p).timeout(Duration.ofSeconds(60))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(destination.toJson())).build(),
                HttpResponse.BodyHandlers.ofString()).whenComplete((r, e) -> {
                    if (e != null || r.statusCode() / 100 != 2) {
                        // D's layer timeout turns this into a TIMED_OUT miss, and the engine recomputes.
                        LOG.warn("transfer {}: P at {} did not take the destination: {}", tid, p,
                                e != null ? e.toString() : r.statusCode() + " " + r.body());
                    }
                });
    }

    /**
     * D: the proxy retried the prefill of {@code transferId} on the P at {@code host:port} (as the proxy reaches it).
     * When D's request for it waits, its drop-select moves to that P ({@link P2pDropSession#moveProducer}) and D
     * sends it its destination from the next layer it awaits on; when the request has not begun, the notice is held
     * ({@link TransferNotices}) and the request asks that P when it begins.
     *
     * @return the first layer the new P writes, or -1 when the notice is held
     * @throws KVException {@code INVALID_ARGUMENT} for a missing transfer id or host, or a port outside 1..65535;
     *     {@code CLOSED} naming the transfer when D's request for it has ended, or its P already committed every
     *     layer, or it missed
     */
    public int prefillMoved(String transferId, String host, Integer port) {
        if (transferId == null || transferId.isEmpty() || host == null || host.isEmpty() || port == null
                || port < 1 || port > 65535) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a moved prefill needs transfer_id, remote_host and "
                    + "remote_port (1..65535); got transfer " + transferId + " at " + host + ":" + port)
                    .operation("p2p prefill moved").key(transferId).build();
        }
        P2pDropSession drop = waitingOrHold(transferId, new TransferNotices.Notice(host, port));
        if (drop == null) {
            return -1;
        }
        int from = drop.moveProducer("the proxy retried it on " + host + ":" + port);
        LOG.info("transfer {}: the prefill moved to {}:{}; asking it for the layers from {} on", transferId, host, port,
                from);
        sendDestination(transferId, host, port, drop.transferParams(from));
        return from;
    }

    /**
     * D: the proxy gave up the prefill of {@code transferId} (every P it tried failed). A drop-select waiting for it
     * misses at once ({@link P2pDropSession#abandon}) and the engine recomputes, instead of waiting for its layer
     * timeout; a notice for a request not begun yet is held as {@link #prefillMoved}'s, and the request then misses
     * without asking any P.
     *
     * @return true when a waiting drop-select was ended, false when the notice is held
     * @throws KVException {@code INVALID_ARGUMENT} without a transfer id; {@code CLOSED} as {@link #prefillMoved}
     */
    public boolean prefillAbandoned(String transferId) {
        if (transferId == null || transferId.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a notice that the prefill was given up needs its "
                    + "transfer_id").operation("p2p prefill abandoned").build();
        }
        P2pDropSession drop = waitingOrHold(transferId, TransferNotices.Notice.GIVEN_UP);
        if (drop == null) {
            return false;
        }
        if (!drop.abandon("the proxy gave up the prefill (every P it tried failed)")) {
            throw KVException.of(ErrorCode.CLOSED, "transfer " + transferId + ": D's load of it has already ended "
                    + "(its KV arrived, or it missed); the notice that its prefill was given up comes too late")
                    .operation("p2p prefill abandoned").key(transferId).build();
        }
        LOG.info("transfer {}: the proxy gave up the prefill; recomputing", transferId);
        return true;
    }

    /** {@link TransferNotices#waitingOrHold}, logging a notice it holds. */
    private P2pDropSession waitingOrHold(String transferId, TransferNotices.Notice notice) {
        P2pDropSession drop = incoming.waitingOrHold(transferId, notice);
        if (drop == null) {
            LOG.info("transfer {}: the prefill {} before D's request began; held for {} s", transferId, notice,
                    TimeUnit.NANOSECONDS.toSeconds(TransferNotices.HOLD_NANOS));
        }
        return drop;
    }

    /** Drops every transfer not yet written (freeing what the engine is done with), then closes the connector. */
    @Override
    public void close() {
        try {
            for (P2pOutgoing o : List.copyOf(outgoing.values())) {
                o.drop("the engine is closing");
            }
            http.close();
        } finally {
            connector.close();
        }
    }
}
