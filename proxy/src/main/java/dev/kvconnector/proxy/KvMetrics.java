package dev.kvconnector.proxy;

import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/** The KV-aware routing series of {@code /metrics}: the index, the event streams and the routing decisions. */
final class KvMetrics {
    /** Why a request went where it went under {@link Policy#KV_AWARE}. */
    enum Reason {
        /** The shared store held the whole prompt: decode only, no prefill. */
        STORE_HIT,
        /** The prefill instance chosen holds a prefix of the prompt in its own cache. */
        CACHE_HIT,
        /** No instance holds a prefix: the least loaded one. */
        LOAD,
        /** The request has no token ids the proxy can hash (a chat, a batch of prompts, or text without a tokenizer). */
        NO_TOKENS,
        /** No publisher has said how its prompts hash yet. */
        NO_INDEX;

        String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    final LongAdder events = new LongAdder();
    final LongAdder malformed = new LongAdder();
    final LongAdder duplicates = new LongAdder();
    final LongAdder outOfOrder = new LongAdder();
    final LongAdder gaps = new LongAdder();
    final LongAdder resyncs = new LongAdder();
    final LongAdder resyncFallbacks = new LongAdder();
    final LongAdder epochChanges = new LongAdder();
    final LongAdder reconnects = new LongAdder();
    /** Milliseconds between the last batch's send and its application, as the publisher's clock says. */
    final AtomicLong lastLagMillis = new AtomicLong();
    final AtomicLong maxLagMillis = new AtomicLong();
    private final LongAdder[] decisions = new LongAdder[Reason.values().length];

    KvMetrics() {
        for (int i = 0; i < decisions.length; i++) {
            decisions[i] = new LongAdder();
        }
    }

    void decided(Reason reason) {
        decisions[reason.ordinal()].increment();
    }

    long decisions(Reason reason) {
        return decisions[reason.ordinal()].sum();
    }

    void lag(long millis) {
        lastLagMillis.set(millis);
        maxLagMillis.accumulateAndGet(millis, Math::max);
    }

    void render(StringBuilder out, PrefixIndex index) {
        gauge(out, "xpyd_kv_index_chunks", "Chunks in the proxy's prefix index.", index.size());
        gauge(out, "xpyd_kv_index_store_chunks", "Indexed chunks that the shared store holds.", index.storeChunks());
        counter(out, "xpyd_kv_events_total", "KV events applied to the index.", events.sum());
        out.append("# HELP xpyd_kv_events_ignored_total KV event messages counted and ignored, by why.\n")
                .append("# TYPE xpyd_kv_events_ignored_total counter\n");
        ignored(out, "malformed", malformed);
        ignored(out, "duplicate", duplicates);
        ignored(out, "out_of_order", outOfOrder);
        counter(out, "xpyd_kv_event_gaps_total", "Sequence gaps seen in the engines' event streams.", gaps.sum());
        counter(out, "xpyd_kv_event_resyncs_total", "Resynchronisations of an engine's entries (gap, restart, start).",
                resyncs.sum());
        counter(out, "xpyd_kv_event_resync_fallbacks_total", "Resynchronisations without a replay or snapshot: the "
                + "engine's entries were dropped and rebuilt from its next events.", resyncFallbacks.sum());
        counter(out, "xpyd_kv_event_epochs_total", "Publisher restarts seen (a new epoch).", epochChanges.sum());
        counter(out, "xpyd_kv_event_reconnects_total", "Event links reconnected after three missed heartbeats.",
                reconnects.sum());
        gauge(out, "xpyd_kv_event_lag_ms", "Time from an engine sending its last event batch to the index applying it.",
                lastLagMillis.get());
        gauge(out, "xpyd_kv_event_lag_max_ms", "Largest event lag seen.", maxLagMillis.get());
        out.append("# HELP xpyd_kv_route_decisions_total Requests routed by the kv-aware policy, by reason.\n")
                .append("# TYPE xpyd_kv_route_decisions_total counter\n");
        for (Reason r : Reason.values()) {
            out.append("xpyd_kv_route_decisions_total{reason=\"").append(r.label()).append("\"} ")
                    .append(decisions(r)).append('\n');
        }
    }

    private static void ignored(StringBuilder out, String why, LongAdder n) {
        out.append("xpyd_kv_events_ignored_total{why=\"").append(why).append("\"} ").append(n.sum()).append('\n');
    }

    private static void counter(StringBuilder out, String name, String help, long value) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n')
                .append("# TYPE ").append(name).append(" counter\n").append(name).append(' ').append(value).append('\n');
    }

    private static void gauge(StringBuilder out, String name, String help, long value) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n')
                .append("# TYPE ").append(name).append(" gauge\n").append(name).append(' ').append(value).append('\n');
    }
}
