package dev.kvconnector.connector;

import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStore;

/**
 * Inserts and drop-selects a request's KV cache and hidden states, in off-heap memory, between an engine and a
 * backend, with vLLM's lookup-buffer semantics done right: a producer inserts layer by layer and commits; a
 * consumer looks up the longest committed prefix and drop-selects it into its own cache, either after the commit
 * or layer by layer while the producer is still writing.
 *
 * <p>Backends implement this interface: {@link StoreConnector} over any {@link KVStore} (network stores, shared
 * memory), and a peer-to-peer transfer engine, where the consumer's {@link DropTarget} is the memory the producer
 * writes into. Layers come from a {@link LayerSource} and go to a {@link LayerSink}; a miss is a {@link DropResult}
 * with a {@link MissReason}, and failures of the backend are {@link dev.kvconnector.error.KVException}s.
 *
 * <p>Implementations are thread-safe: many sessions may run at once.
 */
public interface KVStoreConnector extends AutoCloseable {
    /** Starts a builder for a {@link StoreConnector} over {@code store} with {@code layout}; the caller closes the store. */
    static StoreConnector.Builder builder(KVStore store, KVLayout layout) {
        return StoreConnector.builder(store, layout);
    }

    /**
     * Starts a builder for a {@link StoreConnector} over the store at {@code storeUri} (as {@code KVStores.open}
     * reads it), opened by {@code build()} and closed with the connector.
     */
    static StoreConnector.Builder builder(String storeUri, KVLayout layout) {
        return StoreConnector.builder(storeUri, layout);
    }

    /** Begins inserting a request's KV; nothing is visible to consumers until the session commits. */
    InsertSession beginInsert(RequestTokens request);

    /**
     * {@link #beginInsert(RequestTokens)} in {@code ended}, a session this connector began before that has ended
     * (committed, aborted or closed), as Aeron's {@code tryClaim} fills a caller's {@code BufferClaim}: a producer
     * that hands each request's session back allocates nothing per request. The caller stops using {@code ended} for
     * its old request: the returned session, {@code ended} itself where the connector can reuse it and a new one
     * otherwise (the default), belongs to the new request.
     *
     * @param ended an ended session of this connector, or null for a new one
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} from a connector that reuses sessions, when
     *     {@code ended} is still open or another connector's
     */
    default InsertSession beginInsert(RequestTokens request, InsertSession ended) {
        return beginInsert(request);
    }

    /** The longest committed prefix of the request, in tokens, at chunk granularity (0 when nothing is stored). */
    int lookup(RequestTokens request);

    /** Reads the longest committed prefix of the request into {@code target}, with the connector's drop mode. */
    DropResult dropSelect(RequestTokens request, DropTarget target);

    /** Reads the longest committed prefix of the request into {@code target}, then consumes or retains it. */
    DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode);

    /**
     * Starts a layer-wise drop-select that may begin before the producer commits: layer {@code i} is loaded as soon
     * as it has arrived, and {@link DropSession#awaitLayer(int)} waits for it.
     */
    DropSession beginDropSelect(RequestTokens request, DropTarget target);

    /**
     * {@link #beginDropSelect(RequestTokens, DropTarget)} in {@code ended}, a session this connector began before
     * whose load has ended (its {@code result()} returned or it was closed), as
     * {@link #beginInsert(RequestTokens, InsertSession)} reuses an insert's: the caller stops using {@code ended} for
     * its old request, and the returned session ({@code ended} itself where the connector can reuse it, a new one
     * otherwise, the default) belongs to the new request.
     *
     * @param ended an ended drop-select of this connector, or null for a new one
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} from a connector that reuses sessions, when
     *     {@code ended} is still loading or another connector's
     */
    default DropSession beginDropSelect(RequestTokens request, DropTarget target, DropSession ended) {
        return beginDropSelect(request, target);
    }

    /** The layout every transfer of this connector has. */
    KVLayout layout();

    /** The model, layout, rank and chunk size this connector binds every request's keys to. */
    KeyContext keyContext();

    /**
     * Whether this connector's objects carry hidden states: when false (vLLM V1's and LMCache's formats hold KV
     * alone), {@code putHidden} and a {@link DropTarget} with hidden states are refused, and an engine that needs
     * the last position's output recomputes the last prompt token, as vLLM does.
     */
    default boolean holdsHiddenStates() {
        return true;
    }

    /**
     * Whether this connector's keys bind a request's namespace ({@link RequestTokens#inNamespace}); when false
     * (vLLM's and LMCache's keys), a request with one is refused and equal prefixes share their objects.
     */
    default boolean bindsNamespace() {
        return true;
    }

    /** Where this connector moves KV, for messages: a store URI or a peer, secrets masked. */
    String endpoint();

    /** Per-layer latency, bytes, hits and misses so far. */
    ConnectorMetrics.Snapshot metrics();

    /** Zeroes every metric, for example after a warm-up or at the start of a reporting interval. */
    void resetMetrics();

    /**
     * Ends or waits for in-flight transfers and releases the connector's memory. Idempotent; afterwards
     * {@link #beginInsert} and {@link #beginDropSelect} throw {@code CLOSED}.
     */
    @Override
    void close();
}
