package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/** The KV-aware routing series of {@code /metrics}: the index, the event streams and the routing decisions. */
final class KvMetrics {
    /** Why a request went where it went under {@link Policy#KV_AWARE}. */
    enum Reason {
        /** The shared store held the whole prompt: decode only, no prefill. */
        STORE_HIT,
        /**
         * The shared store held a prefix of the prompt and at most {@link ProxyConfig#kvDecodeMaxSuffix()} tokens
         * follow it: decode only, D loads the prefix and computes the suffix (conditional disaggregation).
         */
        STORE_PREFIX,
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
    /** Messages the proxy's bounded queues dropped unapplied ({@link KvEventIngest}), and the events in them. */
    final LongAdder messagesDropped = new LongAdder();
    final LongAdder eventsDropped = new LongAdder();
    /** Messages received and waiting to be applied, all engines together, and the most there were at once. */
    private final AtomicLong queuedMessages = new AtomicLong();
    private final AtomicLong maxQueuedMessages = new AtomicLong();
    /** Milliseconds between the last batch's send and its application, as the publisher's clock says. */
    final AtomicLong lastLagMillis = new AtomicLong();
    final AtomicLong maxLagMillis = new AtomicLong();
    private final LongAdder[] decisions = new LongAdder[Reason.values().length];
    /** Prompt tokens the index predicted the chosen instances to load, and those they reported loading. */
    final LongAdder predictedTokens = new LongAdder();
    final LongAdder actualTokens = new LongAdder();
    /** Reported predictions that were exact, over (a stale entry: less was found) and under (an entry not yet seen). */
    final LongAdder exact = new LongAdder();
    final LongAdder over = new LongAdder();
    final LongAdder under = new LongAdder();
    /** Predictions whose instance answered without a valid {@link #LOADED_TOKENS_HEADER} (vLLM, an old engine). */
    final LongAdder unreported = new LongAdder();

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

    /**
     * The response header in which an engine reports the prompt tokens whose KV it loaded for the request (its
     * cache's or the store's matched prefix; 0 on a miss, a failed load or a recompute): a decimal int, on every
     * completion response, streamed or not, so the proxy reads it with the status line and buffers nothing.
     */
    static final String LOADED_TOKENS_HEADER = "x-kvc-loaded-tokens";

    /**
     * Compares a prediction of {@code predicted} tokens with the engine's {@link #LOADED_TOKENS_HEADER} value
     * {@code reported} (null when absent): counts it exact, over or under, or unreported when the value is absent,
     * not a number or negative. Never throws: a wrong prediction is only counted.
     */
    void compare(int predicted, String reported) {
        int actual = parseLoaded(reported);
        if (actual < 0) {
            unreported.increment();
            return;
        }
        predictedTokens.add(predicted);
        actualTokens.add(actual);
        (predicted == actual ? exact : predicted > actual ? over : under).increment();
    }

    /** The header's value, or -1 when it is absent, not a decimal int, or negative. */
    private static int parseLoaded(String value) {
        if (value == null || value.isEmpty() || value.length() > 10) {
            return -1;
        }
        long n = 0;
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
            n = n * 10 + (c - '0');
        }
        return n > Integer.MAX_VALUE ? -1 : (int) n;
    }

    /** {@code delta} messages joined (positive) or left (negative) an engine's queue. */
    void queued(int delta) {
        long now = queuedMessages.addAndGet(delta);
        if (delta > 0 && now > maxQueuedMessages.get()) {
            maxQueuedMessages.accumulateAndGet(now, Math::max);
        }
    }

    /** The most messages waiting at once, all engines together. */
    long maxQueued() {
        return maxQueuedMessages.get();
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
        counter(out, "xpyd_kv_event_messages_dropped_total", "KV event messages dropped unapplied because the "
                + "engine's queue was full; each is a gap, resynchronised.", messagesDropped.sum());
        counter(out, "xpyd_kv_events_dropped_total", "Events in the dropped messages, as their batches count them.",
                eventsDropped.sum());
        gauge(out, "xpyd_kv_event_queue_messages", "KV event messages received and waiting to be applied, all "
                + "engines.", queuedMessages.get());
        gauge(out, "xpyd_kv_event_queue_messages_max", "Most KV event messages waiting at once.",
                maxQueuedMessages.get());
        out.append("# HELP xpyd_kv_route_decisions_total Requests routed by the kv-aware policy, by reason.\n")
                .append("# TYPE xpyd_kv_route_decisions_total counter\n");
        for (Reason r : Reason.values()) {
            out.append("xpyd_kv_route_decisions_total{reason=\"").append(r.label()).append("\"} ")
                    .append(decisions(r)).append('\n');
        }
        counter(out, "xpyd_kv_predicted_tokens_total", "Prompt tokens the index predicted the chosen instance (P, or D"
                + " for decode-only) to load, over the requests whose engine reported its actual hit.",
                predictedTokens.sum());
        counter(out, "xpyd_kv_actual_tokens_total", "Prompt tokens those engines reported loading (the "
                + LOADED_TOKENS_HEADER + " response header).", actualTokens.sum());
        out.append("# HELP xpyd_kv_predictions_total Kv-aware predictions against the engine's report: exact, over"
                + " (the index predicted more than was found: a stale entry), under, or unreported (no header).\n")
                .append("# TYPE xpyd_kv_predictions_total counter\n");
        prediction(out, "exact", exact);
        prediction(out, "over", over);
        prediction(out, "under", under);
        prediction(out, "unreported", unreported);
    }

    /** The prediction counters for the proxy's JSON {@code /status}. */
    void status(ObjectNode out) {
        out.put("predicted_tokens", predictedTokens.sum()).put("actual_tokens", actualTokens.sum())
                .put("exact", exact.sum()).put("over", over.sum()).put("under", under.sum())
                .put("unreported", unreported.sum());
    }

    private static void prediction(StringBuilder out, String outcome, LongAdder n) {
        out.append("xpyd_kv_predictions_total{outcome=\"").append(outcome).append("\"} ").append(n.sum())
                .append('\n');
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
