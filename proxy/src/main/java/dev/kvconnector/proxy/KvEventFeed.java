package dev.kvconnector.proxy;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventReader;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.MalformedEventException;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One engine's event stream into the {@link PrefixIndex}: checks each message's epoch and sequence, applies it, and
 * resynchronises when it cannot.
 *
 * <ul>
 *   <li>The first message, and any message of a new epoch (the publisher restarted), starts a resynchronisation
 *       from sequence 0.</li>
 *   <li>A sequence past the next expected one is a gap: a resynchronisation from the first one missed. The proxy's
 *       own bounded queue makes one when it drops messages it could not apply in time ({@link KvEventIngest}).</li>
 *   <li>A sequence already applied is a duplicate; one before that, out of order: counted, ignored.</li>
 *   <li>Resynchronising asks the engine's replay endpoint for every message from that sequence. A kvconnector
 *       publisher answers with them, or with a snapshot (a batch that clears and re-stores what it holds) when they
 *       are gone; either is applied in order, as it arrives. Without a replay endpoint, or when the answer still
 *       leaves a gap (vLLM's publisher keeps a bounded buffer and has no snapshot), the rebuild rule applies: the
 *       engine's entries are dropped and rebuilt from its events from here on. Until then the index knows less, never
 *       more: a request routed on it is at worst a cache miss.</li>
 * </ul>
 * Live messages come read by a {@link KvEventReader}, which allocates nothing per message; replayed ones, and scripted
 * ones in tests, as {@link KvEventBatch} records. Not thread-safe: one thread (the engine's apply thread) feeds it.
 */
final class KvEventFeed {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventFeed.class);

    /** Asks the publisher for its messages from a sequence on, handing each to {@code each} as it arrives. */
    @FunctionalInterface
    interface Replay {
        void from(long sequence, Consumer<KvEventBatch> each) throws MalformedEventException;
    }

    final String instance;
    final int publisher;
    private final PrefixIndex index;
    private final KvMetrics metrics;
    private final Replay replay;
    private boolean synced;
    private long epoch;
    private long expected;
    private volatile KvEventSource source;
    /** The last medium seen and whether it is the shared store: media repeat, and a reader shares their strings. */
    private String lastMedium;
    private boolean lastShared;

    /** @param replay the publisher's replay, or null when it has none */
    KvEventFeed(String instance, int publisher, PrefixIndex index, KvMetrics metrics, Replay replay) {
        this.instance = instance;
        this.publisher = publisher;
        this.index = index;
        this.metrics = metrics;
        this.replay = replay;
    }

    /** What the publisher's last message said about it (epoch, chunk size, hash root), or null before any. */
    KvEventSource source() {
        return source;
    }

    /** A message that did not decode: counted; the sequence number it took shows as a gap on the next one. */
    void malformed(MalformedEventException e) {
        metrics.malformed.increment();
        LOG.debug("KV events of {}: malformed message ignored: {}", instance, e.getMessage());
    }

    /** One live message, as records. */
    void accept(KvEventBatch b) {
        if (admit(b.source(), b.sequence())) {
            apply(b);
        }
    }

    /** One live message, as {@code r} read it last. */
    void accept(KvEventReader r) {
        if (admit(r.source(), r.sequence())) {
            apply(r);
        }
    }

    /**
     * Checks a live message's epoch and sequence, resynchronising on a restart or a gap; returns whether the message
     * is to be applied now, in order.
     */
    private boolean admit(KvEventSource s, long sequence) {
        if (!synced || s.epoch() != epoch) {
            if (synced) {
                metrics.epochChanges.increment();
                LOG.info("KV events of {}: new epoch {} (was {}): the publisher restarted; resynchronising", instance,
                        s.epoch(), epoch);
            }
            epoch = s.epoch();
            source = s;
            synced = true;
            index.clear(publisher);
            expected = 0;
            return resync(sequence);
        }
        source = s;
        if (sequence < expected) {
            (sequence == expected - 1 ? metrics.duplicates : metrics.outOfOrder).increment();
            return false;
        }
        if (sequence > expected) {
            metrics.gaps.increment();
            LOG.info("KV events of {}: gap, expected sequence {} and got {}; resynchronising", instance, expected,
                    sequence);
            return resync(sequence);
        }
        return true;
    }

    /**
     * Replays what is missing before the live message numbered {@code live}; returns whether that message is still to
     * be applied (it is not when the replay went past it).
     */
    private boolean resync(long live) {
        metrics.resyncs.increment();
        if (replay != null && expected < live) {
            try {
                replay.from(expected, r -> {
                    // Only a message that continues the sequence, or a snapshot from there on, applies; after a hole
                    // the rest is read but not applied.
                    if (r.sequence() == expected || startsWithClear(r) && r.sequence() >= expected) {
                        apply(r);
                    }
                });
            } catch (MalformedEventException | RuntimeException e) {
                LOG.info("KV events of {}: replay from {} failed ({}); rebuilding from live events", instance,
                        expected, e.getMessage());
            }
        }
        if (live < expected) {
            return false;
        }
        if (live > expected) {
            // Still a gap: the rebuild rule.
            metrics.resyncFallbacks.increment();
            index.clear(publisher);
        }
        return true;
    }

    private static boolean startsWithClear(KvEventBatch b) {
        return !b.events().isEmpty() && b.events().get(0) instanceof KvEvent.AllCleared;
    }

    private void apply(KvEventBatch b) {
        for (KvEvent e : b.events()) {
            switch (e) {
                case KvEvent.Stored s -> index.stored(publisher, s.chunkHash(), shared(s.storeUri()));
                case KvEvent.Removed r -> index.removed(publisher, r.chunkHash(), shared(r.storeUri()));
                case KvEvent.LoadFailed f -> {
                    if (f.chunkHash() != null) {
                        index.removed(publisher, f.chunkHash(), shared(f.storeUri()));
                    }
                }
                case KvEvent.AllCleared c -> index.clear(publisher);
            }
        }
        applied(b.sequence(), b.events().size(), b.timestampSeconds());
    }

    private void apply(KvEventReader r) {
        int n = r.size();
        for (int i = 0; i < n; i++) {
            switch (r.kind(i)) {
                case STORED -> index.stored(publisher, r.hashKey(i), shared(r.medium(i)));
                case REMOVED -> index.removed(publisher, r.hashKey(i), shared(r.medium(i)));
                case ALL_CLEARED -> index.clear(publisher);
            }
        }
        applied(r.sequence(), n, r.timestampSeconds());
    }

    private boolean shared(String medium) {
        if (medium != lastMedium) {
            lastMedium = medium;
            lastShared = PrefixIndex.isSharedStore(medium);
        }
        return lastShared;
    }

    private void applied(long sequence, int events, double timestampSeconds) {
        metrics.events.add(events);
        if (timestampSeconds > 0) {
            metrics.lag(Math.max(0, System.currentTimeMillis() - (long) (timestampSeconds * 1000)));
        }
        expected = sequence + 1;
    }
}
