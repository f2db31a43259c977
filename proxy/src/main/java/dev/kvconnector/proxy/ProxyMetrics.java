package dev.kvconnector.proxy;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counters and histograms served on {@code /metrics} in the Prometheus text format (version 0.0.4).
 * Per-instance series are labelled {@code role} and {@code instance}; they are kept by instance name so a
 * removed and re-added instance continues its series.
 */
final class ProxyMetrics {

    /** The per-instance series. */
    static final class InstanceStats {
        final LongAdder requests = new LongAdder();
        final LongAdder errors = new LongAdder();
        final LongAdder timeouts = new LongAdder();
        final Histogram latency = new Histogram();
        final Histogram firstByte = new Histogram();
    }

    private final Map<String, InstanceStats> stats = new ConcurrentHashMap<>();
    private final Map<Integer, LongAdder> responses = new ConcurrentHashMap<>();
    final LongAdder clientDisconnects = new LongAdder();
    final LongAdder prefillRetries = new LongAdder();
    final LongAdder decodeRetries = new LongAdder();
    final LongAdder decodeOnlyFallbacks = new LongAdder();
    /** Concurrent-flow prefill retries that D took notice of ({@code InferenceCall.announcePrefillMove}). */
    final LongAdder prefillMovesAnnounced = new LongAdder();
    /**
     * Requests the kv-aware policy sent straight to D because the shared store held their whole prompt or all but a
     * short suffix ({@link KvRoute#decodeOnly}).
     */
    final LongAdder kvDecodeOnly = new LongAdder();
    final LongAdder staleConnectionRetries = new LongAdder();
    final Histogram clientFirstByte = new Histogram();

    InstanceStats of(Instance i) {
        InstanceStats s = i.stats;
        if (s == null) {
            // Looked up by name once per Instance object, then cached on it: the request path allocates nothing.
            s = stats.computeIfAbsent(i.role.label() + '\u0000' + i.name, k -> new InstanceStats());
            i.stats = s;
        }
        return s;
    }

    void response(int status) {
        responses.computeIfAbsent(status, k -> new LongAdder()).increment();
    }

    /** The series, with the kv-aware policy's when {@code kv} is not null. */
    String render(InstancePool pool, KvRouter kv) {
        StringBuilder out = new StringBuilder(4096);
        out.append("# HELP xpyd_proxy_responses_total Responses the proxy sent to clients, by HTTP status.\n")
                .append("# TYPE xpyd_proxy_responses_total counter\n");
        responses.forEach((code, n) -> out.append("xpyd_proxy_responses_total{code=\"").append(code).append("\"} ")
                .append(n.sum()).append('\n'));
        counter(out, "xpyd_proxy_client_disconnects_total", "Clients that went away before their answer ended.",
                clientDisconnects);
        counter(out, "xpyd_proxy_prefill_retries_total", "Prefills sent again to another instance.", prefillRetries);
        counter(out, "xpyd_proxy_prefill_moves_announced_total", "Concurrent-flow prefill retries that D took notice"
                + " of (POST /kv/p2p/prefill answered 2xx), so that a peer-to-peer D loads from the new P.",
                prefillMovesAnnounced);
        counter(out, "xpyd_proxy_decode_retries_total", "Decodes sent again to another instance before any byte.",
                decodeRetries);
        counter(out, "xpyd_proxy_decode_only_total", "Requests decoded without a prefill after prefill failed.",
                decodeOnlyFallbacks);
        counter(out, "xpyd_proxy_kv_decode_only_total", "Requests decoded without a prefill because the shared store"
                + " held their whole prompt, or all but a suffix of at most --kv-decode-max-suffix tokens (kv-aware "
                + "policy; xpyd_kv_route_decisions_total tells the two apart).", kvDecodeOnly);
        counter(out, "xpyd_proxy_stale_connection_retries_total", "Requests sent again to the same instance because"
                + " a reused keep-alive connection closed before the response started.", staleConnectionRetries);
        out.append("# HELP xpyd_proxy_client_first_byte_seconds Time from a client request to its first answer byte.\n")
                .append("# TYPE xpyd_proxy_client_first_byte_seconds histogram\n");
        clientFirstByte.render(out, "xpyd_proxy_client_first_byte_seconds", "flow=\"all\"");

        List<Instance> instances = pool.all();
        header(out, "xpyd_instance_requests_total", "counter", "Requests sent to an instance.");
        each(out, instances, "xpyd_instance_requests_total", s -> s.requests.sum());
        header(out, "xpyd_instance_errors_total", "counter",
                "Failed requests to an instance: unreachable, timeout, 5xx, cut short.");
        each(out, instances, "xpyd_instance_errors_total", s -> s.errors.sum());
        header(out, "xpyd_instance_timeouts_total", "counter", "Requests to an instance that timed out.");
        each(out, instances, "xpyd_instance_timeouts_total", s -> s.timeouts.sum());
        header(out, "xpyd_instance_outstanding", "gauge", "Requests in flight on an instance.");
        for (Instance i : instances) {
            out.append("xpyd_instance_outstanding{").append(labels(i)).append("} ").append(i.outstanding.get())
                    .append('\n');
        }
        header(out, "xpyd_instance_healthy", "gauge", "1 while an instance takes requests, 0 while ejected.");
        for (Instance i : instances) {
            out.append("xpyd_instance_healthy{").append(labels(i)).append("} ").append(i.healthy() ? 1 : 0)
                    .append('\n');
        }
        header(out, "xpyd_instance_request_seconds", "histogram", "Time from sending to an instance to its last byte.");
        for (Instance i : instances) {
            of(i).latency.render(out, "xpyd_instance_request_seconds", labels(i));
        }
        header(out, "xpyd_instance_first_byte_seconds", "histogram",
                "Time from sending to an instance to its first body byte.");
        for (Instance i : instances) {
            of(i).firstByte.render(out, "xpyd_instance_first_byte_seconds", labels(i));
        }
        if (kv != null) {
            kv.metrics.render(out, kv.index);
        }
        return out.toString();
    }

    private void each(StringBuilder out, List<Instance> instances, String name,
                      java.util.function.ToLongFunction<InstanceStats> value) {
        for (Instance i : instances) {
            out.append(name).append('{').append(labels(i)).append("} ").append(value.applyAsLong(of(i))).append('\n');
        }
    }

    private static void counter(StringBuilder out, String name, String help, LongAdder value) {
        header(out, name, "counter", help);
        out.append(name).append(' ').append(value.sum()).append('\n');
    }

    private static void header(StringBuilder out, String name, String type, String help) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n')
                .append("# TYPE ").append(name).append(' ').append(type).append('\n');
    }

    private static String labels(Instance i) {
        return "role=\"" + i.role.label() + "\",instance=\"" + i.name + "\"";
    }
}
