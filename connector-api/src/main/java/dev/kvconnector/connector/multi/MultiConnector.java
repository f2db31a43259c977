package dev.kvconnector.connector.multi;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.config.KvTransferConfig;
import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.spi.ConnectorConfig;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Several connectors as one, as vLLM's {@code MultiConnector} composes them: typically a peer-to-peer connector
 * first, for the request in flight, and a store connector after it, which keeps every request's KV for prefix reuse.
 *
 * <ul>
 *   <li><b>Inserts go to every connector</b>, in order: each layer is put into each, the hidden states into those
 *       that {@linkplain KVStoreConnector#holdsHiddenStates hold them}, and {@code commit} commits each, then throws
 *       the first failure (the others suppressed): a store that fails does not undo what the peer-to-peer path
 *       delivered.</li>
 *   <li><b>Loads come from one connector</b>: the first whose {@link #lookup} covers the whole request, otherwise the
 *       first connector, whose drop-select waits for the request in flight. {@link #lookup} is the most any holds.</li>
 *   <li><b>Namespaces</b>: a connector whose keys bind no namespace (vLLM's and LMCache's, the usual prefix store)
 *       gets the request without one, so equal prefixes of different transfers share their objects; the others get
 *       it as it came (a peer-to-peer connector reads its transfer id there).</li>
 * </ul>
 *
 * <p>Every connector must have the same layout. The composite owns them: {@link #close()} closes each, last first.
 * A peer-to-peer drop-select's own API (its {@code kv_transfer_params}) stays on the session the chosen connector
 * returned. Chosen by configuration ({@link dev.kvconnector.connector.spi.KVConnectors#open}, which builds each
 * composed connector through its provider, or {@link #fromConfig} with a factory of one's own), in vLLM's form:
 *
 * <pre>{@code
 * {"kv_connector": "MultiConnector", "kv_role": "kv_both",
 *  "kv_connector_extra_config": {"connectors": [
 *     {"kv_connector": "TransferEngineConnector", "kv_role": "kv_both", ...},
 *     {"kv_connector": "StoreConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"store_uri": "..."}}]}}
 * }</pre>
 */
public final class MultiConnector implements KVStoreConnector {
    /** The {@code kv_connector} name of a composite in {@code kv_transfer_config}. */
    public static final String NAME = "MultiConnector";
    /** The {@code kv_connector_extra_config} key listing the composed connectors' configs, in order. */
    public static final String CONNECTORS = "connectors";

    private final List<KVStoreConnector> connectors;

    private MultiConnector(List<KVStoreConnector> connectors) {
        this.connectors = List.copyOf(connectors);
    }

    /**
     * Composes {@code connectors}, in order (loads prefer the first that holds a request, and fall back to the first).
     *
     * @throws KVException {@code INVALID_CONFIG} for no connector or connectors of different layouts
     */
    public static MultiConnector of(List<KVStoreConnector> connectors) {
        if (connectors.isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "a composite connector needs at least one connector")
                    .operation("compose").build();
        }
        KVLayout first = connectors.getFirst().layout();
        for (KVStoreConnector c : connectors) {
            if (c.layout().fingerprint() != first.fingerprint()) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, "composed connectors must share a layout: "
                        + c.endpoint() + " has " + c.layout().name() + ", " + connectors.getFirst().endpoint()
                        + " has " + first.name()).operation("compose").build();
            }
        }
        return new MultiConnector(connectors);
    }

    /**
     * Builds the composite that {@code config} names ({@code kv_connector} {@value #NAME}, and the composed
     * connectors' configs under {@code kv_connector_extra_config.connectors}), each built by {@code factory}. On a
     * failure the connectors already built are closed. {@link dev.kvconnector.connector.spi.KVConnectors#open} builds
     * each one through the connector providers on the class path instead.
     *
     * @throws KVException {@code INVALID_CONFIG} naming what is missing or of the wrong type
     */
    public static MultiConnector fromConfig(KvTransferConfig config,
                                            Function<KvTransferConfig, KVStoreConnector> factory) {
        return fromConfig(ConnectorConfig.root(config), c -> factory.apply(c.config()));
    }

    /**
     * As {@link #fromConfig(KvTransferConfig, Function)}, for a composite at {@code config}'s path: each composed
     * connector's config comes with its own path ({@code ...connectors[i]}), so its errors name their fields whole.
     */
    public static MultiConnector fromConfig(ConnectorConfig config, Function<ConnectorConfig, KVStoreConnector> factory) {
        if (!NAME.equals(config.name())) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, config.path() + ".kv_connector is '" + config.name()
                    + "', not '" + NAME + "'").operation("compose").build();
        }
        config.rejectUnknown(Set.of(CONNECTORS));
        if (!(config.config().extraConfig(CONNECTORS, null) instanceof List<?> list) || list.isEmpty()) {
            throw config.invalid(CONNECTORS, "must be a non-empty list of kv_transfer_config objects, the composed "
                    + "connectors in order (see MultiConnector's javadoc for the form)");
        }
        ObjectMapper json = new ObjectMapper();
        List<KVStoreConnector> built = new ArrayList<>();
        try {
            for (int i = 0; i < list.size(); i++) {
                if (!(list.get(i) instanceof Map<?, ?>)) {
                    throw config.invalid(CONNECTORS + "[" + i + "]", "is not an object");
                }
                JsonNode node = json.valueToTree(list.get(i));
                KvTransferConfig child;
                try {
                    child = KvTransferConfig.fromJsonNode(node);
                } catch (KVException e) {
                    throw KVException.of(e.code(), config.field(CONNECTORS) + "[" + i + "]: " + e.getMessage())
                            .operation("compose").cause(e).build();
                }
                built.add(factory.apply(config.child(CONNECTORS, i, child)));
            }
            return of(built);
        } catch (RuntimeException e) {
            built.reversed().forEach(KVStoreConnector::close);
            throw e;
        }
    }

    /** The composed connectors, in order. */
    public List<KVStoreConnector> connectors() {
        return connectors;
    }

    static RequestTokens requestFor(KVStoreConnector c, RequestTokens request) {
        return c.bindsNamespace() || request.namespace() == null ? request : request.inNamespace(null);
    }

    /** Opens an insert on every connector; when one cannot begin, those begun are aborted and its error thrown. */
    @Override
    public InsertSession beginInsert(RequestTokens request) {
        List<InsertSession> sessions = new ArrayList<>(connectors.size());
        List<Boolean> hidden = new ArrayList<>(connectors.size());
        try {
            for (KVStoreConnector c : connectors) {
                sessions.add(c.beginInsert(requestFor(c, request)));
                hidden.add(c.holdsHiddenStates());
            }
        } catch (RuntimeException e) {
            sessions.forEach(InsertSession::close);
            throw e;
        }
        return new MultiInsertSession(sessions, hidden);
    }

    /** The most tokens any connector holds for the request. */
    @Override
    public int lookup(RequestTokens request) {
        int best = 0;
        for (KVStoreConnector c : connectors) {
            best = Math.max(best, c.lookup(requestFor(c, request)));
        }
        return best;
    }

    /** The connector a load of {@code request} comes from: the first that holds all of it, else the first. */
    public KVStoreConnector loadFrom(RequestTokens request) {
        for (KVStoreConnector c : connectors) {
            if (c.lookup(requestFor(c, request)) == request.totalTokens()) {
                return c;
            }
        }
        return connectors.getFirst();
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target) {
        KVStoreConnector c = loadFrom(request);
        return c.dropSelect(requestFor(c, request), target);
    }

    @Override
    public DropResult dropSelect(RequestTokens request, DropTarget target, DropMode mode) {
        KVStoreConnector c = loadFrom(request);
        return c.dropSelect(requestFor(c, request), target, mode);
    }

    /** The chosen connector's session (a peer-to-peer one keeps its own API, such as its transfer params). */
    @Override
    public DropSession beginDropSelect(RequestTokens request, DropTarget target) {
        KVStoreConnector c = loadFrom(request);
        return c.beginDropSelect(requestFor(c, request), target);
    }

    @Override
    public KVLayout layout() {
        return connectors.getFirst().layout();
    }

    @Override
    public KeyContext keyContext() {
        return connectors.getFirst().keyContext();
    }

    /** True when every connector holds hidden states. */
    @Override
    public boolean holdsHiddenStates() {
        return connectors.stream().allMatch(KVStoreConnector::holdsHiddenStates);
    }

    /** True when any connector binds a namespace (it gets the request's). */
    @Override
    public boolean bindsNamespace() {
        return connectors.stream().anyMatch(KVStoreConnector::bindsNamespace);
    }

    @Override
    public String endpoint() {
        return connectors.stream().map(KVStoreConnector::endpoint).collect(Collectors.joining(" + ", "multi[", "]"));
    }

    /**
     * Bytes, commits, aborts, hits and misses summed over the connectors; the latency summaries are the first
     * connector's (the request in flight).
     */
    @Override
    public ConnectorMetrics.Snapshot metrics() {
        ConnectorMetrics.Snapshot first = connectors.getFirst().metrics();
        long in = 0;
        long out = 0;
        long commits = 0;
        long aborts = 0;
        long hits = 0;
        long partial = 0;
        Map<MissReason, Long> misses = new EnumMap<>(MissReason.class);
        for (KVStoreConnector c : connectors) {
            ConnectorMetrics.Snapshot s = c == connectors.getFirst() ? first : c.metrics();
            in += s.insertedBytes();
            out += s.droppedBytes();
            commits += s.commits();
            aborts += s.aborts();
            hits += s.hits();
            partial += s.partialHits();
            s.misses().forEach((r, n) -> misses.merge(r, n, Long::sum));
        }
        return new ConnectorMetrics.Snapshot(first.insertLayer(), first.dropLayer(), in, out, commits, aborts, hits,
                partial, Map.copyOf(misses), first.dropWait());
    }

    @Override
    public void resetMetrics() {
        connectors.forEach(KVStoreConnector::resetMetrics);
    }

    /** Closes every connector, the last first; the first failure is thrown after all were closed. */
    @Override
    public void close() {
        eachThenThrow(connectors.reversed(), KVStoreConnector::close);
    }

    /** Runs {@code action} on every item; the first failure is thrown after all were tried, the others suppressed. */
    static <T> void eachThenThrow(Iterable<T> items, Consumer<T> action) {
        RuntimeException first = null;
        for (T item : items) {
            try {
                action.accept(item);
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
