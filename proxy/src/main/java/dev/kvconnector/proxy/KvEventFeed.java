package dev.kvconnector.proxy;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.MalformedEventException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One engine's event stream into the {@link PrefixIndex}: checks each message's epoch and sequence, applies it, and
 * resynchronises when it cannot.
 *
 * <ul>
 *   <li>The first message, and any message of a new epoch (the publisher restarted), starts a resynchronisation
 *       from sequence 0.</li>
 *   <li>A sequence past the next expected one is a gap: a resynchronisation from the first one missed.</li>
 *   <li>A sequence already applied is a duplicate; one before that, out of order: counted, ignored.</li>
 *   <li>Resynchronising asks the engine's replay endpoint for every message from that sequence. A kvconnector
 *       publisher answers with them, or with a snapshot (a batch that clears and re-stores what it holds) when they
 *       are gone; either is applied in order. Without a replay endpoint, or when the answer still leaves a gap (vLLM's
 *       publisher keeps a bounded buffer and has no snapshot), the rebuild rule applies: the engine's entries are
 *       dropped and rebuilt from its events from here on. Until then the index knows less, never more: a request
 *       routed on it is at worst a cache miss.</li>
 * </ul>
 * Not thread-safe: one thread (the subscriber's) feeds it.
 */
final class KvEventFeed {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventFeed.class);

    /** Asks the publisher for its messages from a sequence on. */
    @FunctionalInterface
    interface Replay {
        List<KvEventBatch> from(long sequence) throws MalformedEventException;
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

    /** One live message. */
    void accept(KvEventBatch b) {
        if (!synced || b.epoch() != epoch) {
            if (synced) {
                metrics.epochChanges.increment();
                LOG.info("KV events of {}: new epoch {} (was {}): the publisher restarted; resynchronising", instance,
                        b.epoch(), epoch);
            }
            epoch = b.epoch();
            source = b.source();
            synced = true;
            index.clear(publisher);
            expected = 0;
            resync(b);
            return;
        }
        source = b.source();
        if (b.sequence() < expected) {
            (b.sequence() == expected - 1 ? metrics.duplicates : metrics.outOfOrder).increment();
            return;
        }
        if (b.sequence() > expected) {
            metrics.gaps.increment();
            LOG.info("KV events of {}: gap, expected sequence {} and got {}; resynchronising", instance, expected,
                    b.sequence());
            resync(b);
            return;
        }
        apply(b);
    }

    private void resync(KvEventBatch live) {
        metrics.resyncs.increment();
        if (replay != null && expected < live.sequence()) {
            try {
                for (KvEventBatch r : replay.from(expected)) {
                    if (r.sequence() == expected || startsWithClear(r) && r.sequence() >= expected) {
                        apply(r);
                    } else if (r.sequence() > expected) {
                        break;
                    }
                }
            } catch (MalformedEventException | RuntimeException e) {
                LOG.info("KV events of {}: replay from {} failed ({}); rebuilding from live events", instance,
                        expected, e.getMessage());
            }
        }
        if (live.sequence() < expected) {
            return;
        }
        if (live.sequence() > expected) {
            // Still a gap: the rebuild rule.
            metrics.resyncFallbacks.increment();
            index.clear(publisher);
        }
        apply(live);
    }

    private static boolean startsWithClear(KvEventBatch b) {
        return !b.events().isEmpty() && b.events().get(0) instanceof KvEvent.AllCleared;
    }

    private void apply(KvEventBatch b) {
        for (KvEvent e : b.events()) {
            switch (e) {
                case KvEvent.Stored s -> index.stored(publisher, s.chunkHash(), PrefixIndex.isSharedStore(s.storeUri()));
                case KvEvent.Removed r -> index.removed(publisher, r.chunkHash(),
                        PrefixIndex.isSharedStore(r.storeUri()));
                case KvEvent.LoadFailed f -> {
                    if (f.chunkHash() != null) {
                        index.removed(publisher, f.chunkHash(), PrefixIndex.isSharedStore(f.storeUri()));
                    }
                }
                case KvEvent.AllCleared c -> index.clear(publisher);
            }
        }
        metrics.events.add(b.events().size());
        if (b.timestampSeconds() > 0) {
            metrics.lag(Math.max(0, System.currentTimeMillis() - (long) (b.timestampSeconds() * 1000)));
        }
        expected = b.sequence() + 1;
    }
}
