package dev.kvconnector.events;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * Publishes a connector's events out of process the way vLLM's {@code ZmqEventPublisher} does: a ZMQ PUB socket
 * sending {@code (topic, sequence, KVEventBatch)} messages ({@link VllmKvEventCodec}), and a ROUTER socket that
 * answers replay requests (the starting sequence, 8 bytes big-endian) with the buffered messages from there, then
 * the end marker {@code (-1, empty)}.
 *
 * <p>Resynchronisation: when the start asked for is no longer buffered (or was never sent, see below), the answer
 * is a snapshot instead: one message, numbered as the last one sent, whose batch is {@code AllBlocksCleared} followed
 * by a {@code BlockStored} for every chunk this publisher was told of and not told removed since, whether or not
 * those events went out ({@link LiveChunks}: at most {@code liveChunks}, the oldest forgotten first). A subscriber
 * applies it like any batch and goes on from the next number. vLLM's subscribers read it as a batch too.
 *
 * <p>{@link #onEvent} never waits for the sending thread or the network: it applies the event to the snapshot's chunks
 * (a lock held for one map update, or for a replay's copy of them) and offers it to a bounded queue. When the queue is full the event is
 * dropped and counted, and the next message skips a sequence number, so every subscriber sees the gap and asks for
 * the snapshot. The same happens when the connector's events themselves skip ahead a number (the store's own
 * events, which the connector forwards, had a gap). One thread ({@code kvconnector-kv-events}) batches what is queued (up to a millisecond's worth),
 * sends it and serves replays; ZMQ sockets are touched by that thread only. After {@value #HEARTBEAT_MILLIS} ms
 * without events it sends an empty batch (numbered like any other; vLLM's subscribers read it as a batch of no
 * events), so a subscriber that hears nothing for longer knows its connection, not the engine, went quiet.
 *
 * <p>One publisher per connector: the connector's {@link #onAttach} gives it the hash root and chunk size it puts in
 * every topic frame. The epoch in the topic frame is the publisher's own, taken when it is bound.
 */
public final class ZmqKvEventPublisher implements KvEventListener, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ZmqKvEventPublisher.class);
    /** Events queued between the engine's threads and the sending thread. */
    public static final int DEFAULT_QUEUE_EVENTS = 65_536;
    /** Messages kept for replay, as vLLM's {@code buffer_steps}. */
    public static final int DEFAULT_REPLAY_MESSAGES = 10_000;
    /** Chunks remembered for snapshots. */
    public static final int DEFAULT_LIVE_CHUNKS = 1 << 20;
    private static final int MAX_BATCH_EVENTS = 1024;
    /** After this long without events, an empty batch goes out, so subscribers can tell silence from a dead link. */
    public static final long HEARTBEAT_MILLIS = 1_000;

    private final String topic;
    private final ZContext context = new ZContext();
    private final ZMQ.Socket pub;
    private final ZMQ.Socket replay;
    private final String publishEndpoint;
    private final String replayEndpoint;
    private final ArrayBlockingQueue<KvEvent> queue;
    private final int replayMessages;
    private final ArrayDeque<Sent> buffer = new ArrayDeque<>();
    private final LiveChunks live;
    private final VllmKvEventCodec codec = new VllmKvEventCodec();
    private final AtomicBoolean lost = new AtomicBoolean();
    private final LongAdder dropped = new LongAdder();
    private final long epoch = (System.currentTimeMillis() << 12) | ThreadLocalRandom.current().nextInt(1 << 12);
    private final Thread thread;
    private volatile KvEventSource source;
    private volatile boolean running = true;
    private long nextSequence;
    private long lastSentNanos = System.nanoTime();
    /** The last event offered, to see the connector's gaps; guarded by the connector's emitter, which calls in turn. */
    private long lastEpoch;
    private long lastEventSequence;

    private record Sent(long sequence, byte[] payload) {
    }

    private ZmqKvEventPublisher(String publishEndpoint, String replayEndpoint, String topic, int queueEvents,
                                int replayMessages, int liveChunks) {
        this.topic = topic;
        this.queue = new ArrayBlockingQueue<>(queueEvents);
        this.replayMessages = replayMessages;
        this.live = new LiveChunks(liveChunks);
        try {
            this.pub = context.createSocket(SocketType.PUB);
            pub.setSndHWM(100_000);
            this.publishEndpoint = bind(pub, publishEndpoint);
            if (replayEndpoint != null) {
                this.replay = context.createSocket(SocketType.ROUTER);
                this.replayEndpoint = bind(replay, replayEndpoint);
            } else {
                this.replay = null;
                this.replayEndpoint = null;
            }
        } catch (RuntimeException e) {
            context.close();
            throw new IllegalArgumentException("cannot bind KV event sockets " + publishEndpoint + " / "
                    + replayEndpoint + ": " + e, e);
        }
        this.thread = new Thread(this::run, "kvconnector-kv-events");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Binds a publisher with vLLM's defaults (a 65,536-event queue, 10,000 messages of replay, 2^20 chunks for
     * snapshots) and the topic {@code kv}.
     *
     * @param publishEndpoint the PUB socket's ZMQ endpoint, for example {@code tcp://*:5557}; port 0 picks a free one
     * @param replayEndpoint the ROUTER socket's endpoint ({@code tcp://*:5558}), or null for no replay
     */
    public static ZmqKvEventPublisher bind(String publishEndpoint, String replayEndpoint) {
        return bind(publishEndpoint, replayEndpoint, "kv", DEFAULT_QUEUE_EVENTS, DEFAULT_REPLAY_MESSAGES,
                DEFAULT_LIVE_CHUNKS);
    }

    /** Binds a publisher with explicit bounds (each at least 1). */
    public static ZmqKvEventPublisher bind(String publishEndpoint, String replayEndpoint, String topic,
                                           int queueEvents, int replayMessages, int liveChunks) {
        if (publishEndpoint == null || topic == null || topic.contains(";") || queueEvents < 1 || replayMessages < 1
                || liveChunks < 1) {
            throw new IllegalArgumentException("KV event publisher: publishEndpoint=" + publishEndpoint + " topic="
                    + topic + " queueEvents=" + queueEvents + " replayMessages=" + replayMessages + " liveChunks="
                    + liveChunks + " (need an endpoint, a topic without ';', bounds >= 1)");
        }
        return new ZmqKvEventPublisher(publishEndpoint, replayEndpoint, topic, queueEvents, replayMessages,
                liveChunks);
    }

    private static String bind(ZMQ.Socket socket, String endpoint) {
        if (endpoint.endsWith(":0")) {
            // ":*" lets the kernel pick a free port (ZMQ's wildcard port), read back as the last endpoint.
            socket.bind(endpoint.substring(0, endpoint.length() - 1) + "*");
            return socket.getLastEndpoint();
        }
        socket.bind(endpoint);
        return endpoint;
    }

    /** The PUB socket's endpoint, with the port chosen when 0 was asked for. */
    public String publishEndpoint() {
        return publishEndpoint;
    }

    /** The ROUTER socket's endpoint, or null. */
    public String replayEndpoint() {
        return replayEndpoint;
    }

    /** This publisher's epoch, in every topic frame. */
    public long epoch() {
        return epoch;
    }

    /** Events dropped because the queue was full. */
    public long droppedEvents() {
        return dropped.sum();
    }

    @Override
    public void onAttach(KvEventSource attached) {
        this.source = attached;
    }

    @Override
    public void onEvent(KvEvent event) {
        if (event.epoch() == lastEpoch && event.sequence() > lastEventSequence + 1) {
            lost.set(true);
        }
        lastEpoch = event.epoch();
        lastEventSequence = event.sequence();
        live.apply(event);
        if (!queue.offer(event)) {
            dropped.increment();
            lost.set(true);
        }
    }

    private void run() {
        List<KvEvent> batch = new ArrayList<>(MAX_BATCH_EVENTS);
        while (running || !queue.isEmpty()) {
            try {
                serveReplays();
                KvEvent first = queue.poll(1, TimeUnit.MILLISECONDS);
                if (first == null) {
                    if (System.nanoTime() - lastSentNanos > HEARTBEAT_MILLIS * 1_000_000L) {
                        send(batch);
                    }
                    continue;
                }
                batch.add(first);
                queue.drainTo(batch, MAX_BATCH_EVENTS - 1);
                send(batch);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (RuntimeException e) {
                if (running) {
                    LOG.warn("KV event publisher on {}: {}", publishEndpoint, e.toString());
                }
            } finally {
                batch.clear();
            }
        }
    }

    private void send(List<KvEvent> events) {
        lastSentNanos = System.nanoTime();
        if (lost.getAndSet(false)) {
            nextSequence++;
        }
        long seq = nextSequence++;
        byte[] payload = codec.encode(events, System.currentTimeMillis() / 1000.0);
        pub.sendMore(VllmKvEventCodec.topicFrame(topic, topicSource()));
        pub.sendMore(VllmKvEventCodec.sequenceFrame(seq));
        pub.send(payload);
        buffer.addLast(new Sent(seq, payload));
        if (buffer.size() > replayMessages) {
            buffer.removeFirst();
        }
    }

    private KvEventSource topicSource() {
        KvEventSource s = source;
        return s == null ? new KvEventSource(null, epoch, null, null, 0, null)
                : new KvEventSource(s.instance(), epoch, s.storeUri(), s.keyScheme(), s.chunkTokens(), s.rootHash());
    }

    private void serveReplays() {
        if (replay == null) {
            return;
        }
        ZMsg request;
        while ((request = ZMsg.recvMsg(replay, ZMQ.DONTWAIT)) != null) {
            try {
                if (request.size() != 3) {
                    LOG.warn("KV event replay request of {} frames on {} (need identity, empty, sequence)",
                            request.size(), replayEndpoint);
                    continue;
                }
                byte[] identity = request.pop().getData();
                request.pop();
                long start;
                try {
                    start = VllmKvEventCodec.readSequence(request.pop().getData());
                } catch (MalformedEventException e) {
                    LOG.warn("KV event replay request on {}: {}", replayEndpoint, e.getMessage());
                    continue;
                }
                answer(identity, start);
            } finally {
                request.destroy();
            }
        }
    }

    private void answer(byte[] identity, long start) {
        if (covered(start)) {
            for (Sent s : buffer) {
                if (s.sequence() >= start) {
                    reply(identity, s.sequence(), s.payload());
                }
            }
        } else if (nextSequence > 0) {
            List<KvEvent.Stored> held = live.snapshot();
            List<KvEvent> snapshot = new ArrayList<>(held.size() + 1);
            long last = nextSequence - 1;
            snapshot.add(new KvEvent.AllCleared(epoch, last, source == null ? null : source.instance()));
            snapshot.addAll(held);
            reply(identity, last, codec.encode(snapshot, System.currentTimeMillis() / 1000.0));
        }
        reply(identity, VllmKvEventCodec.END_OF_REPLAY, new byte[0]);
    }

    /** Whether every message from {@code start} to the last sent is buffered, none skipped. */
    private boolean covered(long start) {
        if (buffer.isEmpty()) {
            return start >= nextSequence;
        }
        if (start < buffer.peekFirst().sequence() || start > nextSequence) {
            return false;
        }
        long expected = -1;
        for (Iterator<Sent> it = buffer.iterator(); it.hasNext(); ) {
            long s = it.next().sequence();
            if (s < start) {
                continue;
            }
            if (expected >= 0 && s != expected) {
                return false;
            }
            if (expected < 0 && s != start) {
                return false;
            }
            expected = s + 1;
        }
        return expected < 0 ? start == nextSequence : expected == nextSequence;
    }

    private void reply(byte[] identity, long seq, byte[] payload) {
        replay.sendMore(identity);
        replay.sendMore(new byte[0]);
        replay.sendMore(VllmKvEventCodec.sequenceFrame(seq));
        replay.send(payload);
    }

    /** Sends what is queued, stops the thread and closes the sockets. */
    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        try {
            thread.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        context.close();
    }
}
