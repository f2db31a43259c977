package dev.kvconnector.demo;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.mooncake.p2p.P2pDropSession;
import dev.kvconnector.mooncake.p2p.TransferEngineConnector;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.Tensor;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The demo's peer-to-peer transport ({@code --transport p2p}): KV moves from P's cache straight into D's through
 * a {@link TransferEngineConnector}, in the proxy's v1 flow, as vLLM V1's Mooncake and NIXL connectors do.
 *
 * <ol>
 *   <li>P prefills, keeps the request's blocks and hidden states ({@link #hold}), and answers
 *       {@code kv_transfer_params} with the transfer id and its own {@code remote_host}/{@code remote_port}; the
 *       proxy copies them into D's request.</li>
 *   <li>D begins its drop-select (its blocks registered and reserved), and sends its destination, the
 *       {@code kv_transfer_params} of {@link P2pDropSession#transferParams()}, to P's {@code POST /kv/p2p/send}
 *       ({@link #receive}); it then accepts each layer as it lands.</li>
 *   <li>P writes every held layer and the hidden states into D's blocks, commits, and frees the blocks
 *       ({@link #send}). Blocks D never asks for are freed after {@link #HOLD_NANOS} (checked at each hold).</li>
 * </ol>
 *
 * The concurrent flow cannot carry D's destination: the proxy gives P and D their {@code kv_transfer_params} at
 * once and nothing from D reaches P.
 */
public final class P2pTransport implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(P2pTransport.class);
    /** How long P keeps a prefilled request's blocks for D, in ns: 60 s. */
    static final long HOLD_NANOS = 60_000_000_000L;
    /** P's endpoint that takes D's destination. */
    public static final String SEND_PATH = "/kv/p2p/send";

    private final TransferEngineConnector connector;
    private final Map<String, Held> held = new ConcurrentHashMap<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** A request P keeps for D: its prompt, blocks (freed by {@code free}), hidden states and when it expires. */
    record Held(int[] prompt, BlockTable table, Tensor hidden, Runnable free, long expiresNanos) {
    }

    /** Opens the connector over {@code engineUri} ({@code mooncake-te://...}) with {@code cache} registered. */
    public P2pTransport(String engineUri, KVLayout layout, PagedKVCache cache, String modelId, long layerTimeoutMs) {
        this.connector = TransferEngineConnector.builder(engineUri, layout).registerCache(cache).modelId(modelId)
                .layerTimeoutMillis(layerTimeoutMs).stagingBytes(64L << 20).build();
    }

    /** The connector, whose metrics the engine reports. */
    public TransferEngineConnector connector() {
        return connector;
    }

    /** P: keeps a prefilled request for D; {@code free} gives its blocks and hidden states back. */
    void hold(String transferId, int[] prompt, BlockTable table, Tensor hidden, Runnable free) {
        long now = System.nanoTime();
        for (Map.Entry<String, Held> e : List.copyOf(held.entrySet())) {
            if (now - e.getValue().expiresNanos() > 0 && held.remove(e.getKey(), e.getValue())) {
                LOG.warn("transfer {}: D never asked for its KV within {} s; freeing P's blocks", e.getKey(),
                        HOLD_NANOS / 1_000_000_000L);
                e.getValue().free().run();
            }
        }
        held.put(transferId, new Held(prompt, table, hidden, free, now + HOLD_NANOS));
    }

    /**
     * P: writes the held request named by D's destination into D's blocks, layer by layer, then commits.
     *
     * @return bytes written
     * @throws KVException {@code INVALID_ARGUMENT} naming a transfer id P does not hold; the connector's errors
     */
    public long send(KVTransferParams destination, PagedKVCache cache, int layers) {
        String tid = destination.transferId();
        Held h = tid == null ? null : held.remove(tid);
        if (h == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "P holds no prefilled request for transfer " + tid
                    + " (never prefilled here, already sent, or expired after " + HOLD_NANOS / 1_000_000_000L
                    + " s)").operation("p2p send").key(tid).build();
        }
        try (InsertSession insert = connector.beginInsert(RequestTokens.of(h.prompt()).inNamespace(tid),
                destination)) {
            for (int l = 0; l < layers; l++) {
                insert.putLayer(l, cache, h.table());
            }
            if (h.hidden() != null) {
                insert.putHidden(h.hidden());
            }
            insert.commit();
            return connector.layout().layerBytes(h.prompt().length) * layers;
        } finally {
            h.free().run();
        }
    }

    /**
     * D: begins the drop-select, sends its destination to the P named by {@code fromP}'s {@code remote_host} and
     * {@code remote_port}, and waits layer by layer; a P that cannot be told ends the transfer as a miss (no
     * {@code remote_host}: at once; P unreachable or refusing: after the connector's layer timeout).
     *
     * @param onLayer called with each layer accepted, in order (where an engine would compute)
     */
    DropResult receive(RequestTokens request, DropTarget target, KVTransferParams fromP, int layers,
            Consumer<Integer> onLayer) {
        if (fromP == null || fromP.remoteHost() == null || fromP.remotePort() == null) {
            return DropResult.miss(request.totalTokens(), MissReason.ABSENT, "transfer " + request.namespace()
                    + ": kv_transfer_params name no remote_host/remote_port of a P to ask");
        }
        try (P2pDropSession drop = connector.beginDropSelect(request, target)) {
            URI p = URI.create("http://" + fromP.remoteHost() + ":" + fromP.remotePort() + SEND_PATH);
            CompletableFuture<HttpResponse<String>> sent = http.sendAsync(HttpRequest.newBuilder(p)
                    .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(drop.transferParams().toJson())).build(),
                    HttpResponse.BodyHandlers.ofString());
            sent.whenComplete((r, e) -> {
                if (e != null || r.statusCode() != 200) {
                    // D's layer timeout turns this into a TIMED_OUT miss, and the engine recomputes.
                    LOG.warn("transfer {}: P at {} did not send: {}", request.namespace(), p,
                            e != null ? e.toString() : r.statusCode() + " " + r.body());
                }
            });
            for (int l = 0; l < layers && drop.awaitLayer(l); l++) {
                onLayer.accept(l);
            }
            return drop.result();
        }
    }

    /** Frees every held request, then closes the connector. */
    @Override
    public void close() {
        try {
            for (String tid : List.copyOf(held.keySet())) {
                Held h = held.remove(tid);
                if (h != null) {
                    h.free().run();
                }
            }
            http.close();
        } finally {
            connector.close();
        }
    }
}
