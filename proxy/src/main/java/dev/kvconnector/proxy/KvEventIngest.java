package dev.kvconnector.proxy;

import dev.kvconnector.events.KvEventReader;
import dev.kvconnector.events.MalformedEventException;
import dev.kvconnector.events.ZmqKvEventPublisher;
import dev.kvconnector.events.ZmqKvEventSubscriber;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One engine's KV events from its socket into the index, on two threads with a bounded queue between them, so that
 * a flood costs the proxy at most one thread's CPU and bounded memory, and never the request threads' time:
 * <ul>
 *   <li>the socket thread ({@code kvconnector-kv-socket-INSTANCE}) takes each message off the SUB socket, undecoded,
 *       and offers it to the queue. When the queue is full (more than {@link #QUEUE_MESSAGES_PROP_NAME} messages or
 *       {@link #QUEUE_BYTES_PROP_NAME} bytes wait), it drops the message and counts it, with its events
 *       ({@code xpyd_kv_event_messages_dropped_total}, {@code xpyd_kv_events_dropped_total}); the sequence number it
 *       took is a gap for the feed, which resynchronises. It also reconnects a link silent for
 *       {@link #SILENCE_MILLIS}.</li>
 *   <li>the apply thread ({@code kvconnector-kv-feed-INSTANCE}) takes up to {@value #BATCH_MESSAGES} messages at a
 *       time, reads each with a {@link KvEventReader} (nothing allocated per message) and hands it to the
 *       {@link KvEventFeed}, which applies it to the {@link PrefixIndex} or resynchronises (replays run here, so
 *       they hold up this engine's events only).</li>
 * </ul>
 * The index's readers (request threads) never wait for either: see {@link PrefixIndex}.
 */
final class KvEventIngest implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventIngest.class);
    /** System property: the most messages one engine's queue holds before new ones are dropped. */
    static final String QUEUE_MESSAGES_PROP_NAME = "kvc.proxy.kv.events.queue.messages";
    /**
     * Default of {@link #QUEUE_MESSAGES_PROP_NAME}: about a second of a 10^5 events/s flood batched a millisecond at
     * a time, which the apply thread takes a few tens of ms to work off (proxy/README.md, Scheduling).
     */
    static final int QUEUE_MESSAGES_DEFAULT = 1024;
    /** System property: the most payload bytes one engine's queue holds before new messages are dropped. */
    static final String QUEUE_BYTES_PROP_NAME = "kvc.proxy.kv.events.queue.bytes";
    /** Default of {@link #QUEUE_BYTES_PROP_NAME}: 16 MiB, for engines that batch many blocks per message. */
    static final long QUEUE_BYTES_DEFAULT = 16L << 20;
    /** Messages the apply thread takes from the queue at a time. */
    static final int BATCH_MESSAGES = 64;
    private static final int POLL_MILLIS = 100;
    private static final int REPLAY_TIMEOUT_MILLIS = 2_000;
    /** Three heartbeats ({@link ZmqKvEventPublisher#HEARTBEAT_MILLIS}) missed. */
    static final long SILENCE_MILLIS = 3 * ZmqKvEventPublisher.HEARTBEAT_MILLIS;

    private final ZmqKvEventSubscriber sub;
    private final KvEventFeed feed;
    private final KvMetrics metrics;
    private final ArrayBlockingQueue<ZmqKvEventSubscriber.Frames> queue;
    private final long maxBytes;
    private final AtomicLong queuedBytes = new AtomicLong();
    private final KvEventReader reader = new KvEventReader();
    private final Thread socketThread;
    private final Thread applyThread;
    private volatile boolean running = true;

    /**
     * Starts both threads for {@code sub}'s stream into {@code feed}.
     *
     * @param maxMessages the queue's bound in messages, at least 1
     * @param maxBytes its bound in payload bytes, at least 1 (a larger message is queued when the queue is empty)
     */
    KvEventIngest(ZmqKvEventSubscriber sub, KvEventFeed feed, KvMetrics metrics, int maxMessages, long maxBytes) {
        if (maxMessages < 1 || maxBytes < 1) {
            throw new IllegalArgumentException("KV event queue of " + sub.instance() + ": " + maxMessages
                    + " messages, " + maxBytes + " bytes (" + QUEUE_MESSAGES_PROP_NAME + " and "
                    + QUEUE_BYTES_PROP_NAME + " must be at least 1)");
        }
        this.sub = sub;
        this.feed = feed;
        this.metrics = metrics;
        this.queue = new ArrayBlockingQueue<>(maxMessages);
        this.maxBytes = maxBytes;
        this.applyThread = Thread.ofPlatform().daemon().name("kvconnector-kv-feed-" + sub.instance())
                .start(this::applyLoop);
        this.socketThread = Thread.ofPlatform().daemon().name("kvconnector-kv-socket-" + sub.instance())
                .start(this::socketLoop);
    }

    /** The replay a feed of this subscriber uses, or null when it has no replay endpoint. */
    static KvEventFeed.Replay replayOf(ZmqKvEventSubscriber sub) {
        return sub.replays() ? (from, each) -> sub.replay(from, REPLAY_TIMEOUT_MILLIS, each) : null;
    }

    /** {@link #QUEUE_MESSAGES_PROP_NAME}, or its default; a value that is not from 1 to 2^31-1 fails naming it. */
    static int queueMessages() {
        return (int) property(QUEUE_MESSAGES_PROP_NAME, QUEUE_MESSAGES_DEFAULT, Integer.MAX_VALUE, "messages");
    }

    /** {@link #QUEUE_BYTES_PROP_NAME}, or its default; a value that is not from 1 to 2^63-1 fails naming it. */
    static long queueBytes() {
        return property(QUEUE_BYTES_PROP_NAME, QUEUE_BYTES_DEFAULT, Long.MAX_VALUE, "bytes");
    }

    private static long property(String name, long defaultValue, long max, String unit) {
        String v = System.getProperty(name);
        if (v == null) {
            return defaultValue;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n >= 1 && n <= max) {
                return n;
            }
        } catch (NumberFormatException e) {
            // Named in the message below.
        }
        throw new IllegalArgumentException("-D" + name + "=" + v + " is not a number of " + unit + " from 1 to " + max);
    }

    /**
     * Takes messages off the socket into the queue, or drops them. A link silent for {@link #SILENCE_MILLIS} is
     * reconnected (the gap that follows resynchronises), while nothing was ever heard or the publisher sends
     * heartbeats (a kvconnector publisher: its topic has an epoch); a vLLM engine, which sends none, may be silent
     * while idle.
     */
    private void socketLoop() {
        long heard = System.nanoTime();
        while (running) {
            try {
                ZmqKvEventSubscriber.Frames f = sub.receiveFrames(POLL_MILLIS);
                if (f != null) {
                    heard = f.receivedNanos();
                    offer(f);
                } else if (System.nanoTime() - heard > SILENCE_MILLIS * 1_000_000L
                        && (feed.source() == null || feed.source().epoch() != 0)) {
                    metrics.reconnects.increment();
                    LOG.info("KV events of {}: nothing for {} ms; reconnecting", feed.instance, SILENCE_MILLIS);
                    sub.reconnect();
                    heard = System.nanoTime();
                }
            } catch (MalformedEventException e) {
                heard = System.nanoTime();
                feed.malformed(e);
            } catch (RuntimeException e) {
                if (running) {
                    LOG.warn("KV events of {}: {}", feed.instance, e.toString());
                }
            }
        }
    }

    private void offer(ZmqKvEventSubscriber.Frames f) {
        long bytes = f.payload().length;
        // Counted in before it is offered, so that the apply thread never counts it out first. A message larger than
        // the byte bound still goes into an empty queue, so that it is not dropped forever.
        queuedBytes.addAndGet(bytes);
        metrics.queued(1);
        if ((queuedBytes.get() <= maxBytes || queue.isEmpty()) && queue.offer(f)) {
            return;
        }
        queuedBytes.addAndGet(-bytes);
        metrics.queued(-1);
        metrics.messagesDropped.increment();
        metrics.eventsDropped.add(Math.max(0, KvEventReader.countEvents(f.payload())));
    }

    private void applyLoop() {
        List<ZmqKvEventSubscriber.Frames> batch = new ArrayList<>(BATCH_MESSAGES);
        while (running) {
            ZmqKvEventSubscriber.Frames first;
            try {
                first = queue.poll(POLL_MILLIS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (first == null) {
                continue;
            }
            batch.add(first);
            queue.drainTo(batch, BATCH_MESSAGES - 1);
            for (ZmqKvEventSubscriber.Frames f : batch) {
                queuedBytes.addAndGet(-f.payload().length);
                metrics.queued(-1);
                apply(f);
            }
            batch.clear();
        }
    }

    private void apply(ZmqKvEventSubscriber.Frames f) {
        try {
            reader.read(feed.instance, f.topic(), f.sequence(), f.payload());
            feed.accept(reader);
        } catch (MalformedEventException e) {
            feed.malformed(e);
        } catch (RuntimeException e) {
            if (running) {
                LOG.warn("KV events of {}: {}", feed.instance, e.toString());
            }
        }
    }

    /** Messages waiting in the queue now. */
    int queued() {
        return queue.size();
    }

    /** Stops both threads (waiting out a replay in progress) and closes the subscriber. */
    @Override
    public void close() {
        running = false;
        join(socketThread);
        join(applyThread);
        sub.close();
    }

    private static void join(Thread t) {
        try {
            t.join(REPLAY_TIMEOUT_MILLIS + 2_000L);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
