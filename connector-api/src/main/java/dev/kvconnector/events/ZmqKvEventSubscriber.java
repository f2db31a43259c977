package dev.kvconnector.events;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * Reads one publisher's stream ({@link ZmqKvEventPublisher}, or a vLLM engine's {@code --kv-events-config}
 * publisher): a SUB socket for the live messages and, when a replay endpoint is given, a DEALER socket per
 * {@link #replay} call. Decoding is {@link VllmKvEventCodec}'s ({@link #receive}), or the caller's
 * ({@link #receiveFrames}, for a {@link KvEventReader} on another thread).
 *
 * <p>Threads: one thread receives (and {@link #reconnect}s); replays may run on one other thread at the same time,
 * each on a socket of its own.
 */
public final class ZmqKvEventSubscriber implements AutoCloseable {
    private final String instance;
    private final String replayEndpoint;
    private final ZContext context = new ZContext();
    private final String publishEndpoint;
    private final String topic;
    private ZMQ.Socket sub;
    private int receiveTimeoutMillis = -1;
    /** How long a replay request waits for its first reply before it is sent again, in ms. */
    static final int FIRST_REPLY_MILLIS = 250;

    /**
     * Connects to {@code publishEndpoint} ({@code tcp://host:5557}) for messages whose topic starts with
     * {@code topic} ("" for all), and remembers {@code replayEndpoint} (or null) for replays.
     *
     * @param instance the name its events are recorded under
     */
    public ZmqKvEventSubscriber(String instance, String publishEndpoint, String replayEndpoint, String topic) {
        this.instance = instance;
        this.replayEndpoint = replayEndpoint;
        this.publishEndpoint = publishEndpoint;
        this.topic = topic;
        try {
            this.sub = connect();
        } catch (RuntimeException e) {
            context.close();
            throw new IllegalArgumentException("cannot subscribe to KV events of " + instance + " at "
                    + publishEndpoint + ": " + e, e);
        }
    }

    private ZMQ.Socket connect() {
        ZMQ.Socket s = context.createSocket(SocketType.SUB);
        s.setRcvHWM(RECEIVE_HWM_MESSAGES);
        s.connect(publishEndpoint);
        s.subscribe(topic.getBytes(StandardCharsets.UTF_8));
        receiveTimeoutMillis = -1;
        return s;
    }

    /**
     * Messages the SUB socket queues before ZMQ stops reading the connection (and the publisher, its own queue full,
     * drops): a bound on the memory a subscriber that falls behind holds, which one that drains the socket into its
     * own bounded queue never reaches.
     */
    public static final int RECEIVE_HWM_MESSAGES = 10_000;

    /**
     * One message's three frames as they came off the socket, undecoded.
     *
     * @param receivedNanos when it was taken off the socket ({@link System#nanoTime()})
     */
    public record Frames(byte[] topic, byte[] sequence, byte[] payload, long receivedNanos) {
    }

    /**
     * Replaces the SUB socket with a new one: for a link that went quiet longer than the publisher's heartbeat
     * ({@link ZmqKvEventPublisher#HEARTBEAT_MILLIS}). With jeromq 0.6 about 2 fresh loopback PUB/SUB pairs in 100
     * never delivered a message (3 in 150, in a loop here); a new SUB socket did at once. Messages sent meanwhile
     * are lost: the next one shows the gap.
     */
    public void reconnect() {
        context.destroySocket(sub);
        sub = connect();
    }

    /** The instance whose events these are. */
    public String instance() {
        return instance;
    }

    /** Whether a replay endpoint was given. */
    public boolean replays() {
        return replayEndpoint != null;
    }

    /**
     * The next message, waiting at most {@code timeoutMillis}; null when none came.
     *
     * @throws MalformedEventException for a message that does not decode (it is consumed)
     */
    public KvEventBatch receive(int timeoutMillis) throws MalformedEventException {
        Frames f = receiveFrames(timeoutMillis);
        return f == null ? null : VllmKvEventCodec.decode(instance, f.topic(), f.sequence(), f.payload());
    }

    /**
     * The next message's frames, undecoded, waiting at most {@code timeoutMillis}; null when none came.
     *
     * @throws MalformedEventException for a message of other than three frames (it is consumed)
     */
    public Frames receiveFrames(int timeoutMillis) throws MalformedEventException {
        if (timeoutMillis != receiveTimeoutMillis) {
            sub.setReceiveTimeOut(timeoutMillis);
            receiveTimeoutMillis = timeoutMillis;
        }
        byte[] topicFrame = sub.recv(0);
        if (topicFrame == null) {
            return null;
        }
        long received = System.nanoTime();
        byte[] sequence = sub.hasReceiveMore() ? sub.recv(0) : null;
        byte[] payload = sub.hasReceiveMore() ? sub.recv(0) : null;
        int frames = 1 + (sequence == null ? 0 : 1) + (payload == null ? 0 : 1);
        while (sub.hasReceiveMore()) {
            sub.recv(0);
            frames++;
        }
        if (frames != 3) {
            throw new MalformedEventException("message of " + frames + " frames from " + instance
                    + " (need topic, sequence, payload)");
        }
        return new Frames(topicFrame, sequence, payload, received);
    }

    /**
     * Asks the publisher for every message from {@code fromSequence} on and returns them in order, waiting at most
     * {@code timeoutMillis} for each reply. From a kvconnector publisher the answer is the messages, or a snapshot
     * when they are gone; from vLLM's, whatever is still buffered.
     *
     * <p>A request that gets no first reply within {@value #FIRST_REPLY_MILLIS} ms is sent again from a fresh
     * socket, waiting twice as long each time, until {@code timeoutMillis}: with jeromq 0.6 about one replay request
     * in ten, sent right after the SUB socket has been reading, never reached the publisher's ROUTER (2 to 6 in loops
     * of 30; none with the SUB idle; none in 60 with the resend). A fresh socket has a fresh identity, so the ROUTER
     * drops replies to an abandoned request.
     *
     * @throws MalformedEventException when a reply does not decode, or none came in time
     */
    public List<KvEventBatch> replay(long fromSequence, int timeoutMillis) throws MalformedEventException {
        List<KvEventBatch> out = new ArrayList<>();
        replay(fromSequence, timeoutMillis, out::add);
        return out;
    }

    /**
     * {@link #replay(long, int)}, handing each message to {@code each} as it arrives instead of collecting them, so
     * that a long replay holds one message at a time; {@code each} runs on the calling thread. It is handed every
     * message, up to the end marker, or until the call throws.
     *
     * @throws MalformedEventException when a reply does not decode, or none came in time
     */
    public void replay(long fromSequence, int timeoutMillis, Consumer<KvEventBatch> each)
            throws MalformedEventException {
        if (replayEndpoint == null) {
            throw new IllegalStateException("no replay endpoint for the KV events of " + instance);
        }
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
        int attempts = 0;
        long wait = FIRST_REPLY_MILLIS;
        while (true) {
            attempts++;
            long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
            if (replayOnce(fromSequence, timeoutMillis, (int) Math.min(wait, left), each)) {
                return;
            }
            wait *= 2;
            if (System.nanoTime() - deadline >= 0) {
                throw new MalformedEventException("replay from " + replayEndpoint + " for " + instance
                        + " got no answer to " + attempts + " requests in " + timeoutMillis + " ms");
            }
        }
    }

    /** One request on a fresh socket; false when no first reply came within {@code firstMillis}. */
    private boolean replayOnce(long fromSequence, int timeoutMillis, int firstMillis, Consumer<KvEventBatch> each)
            throws MalformedEventException {
        ZMQ.Socket dealer = context.createSocket(SocketType.DEALER);
        try {
            dealer.setReceiveTimeOut(firstMillis);
            dealer.setLinger(0);
            dealer.connect(replayEndpoint);
            dealer.sendMore(new byte[0]);
            dealer.send(VllmKvEventCodec.sequenceFrame(fromSequence));
            int received = 0;
            byte[] topic = ("replay;" + instance).getBytes(StandardCharsets.UTF_8);
            while (true) {
                ZMsg reply = ZMsg.recvMsg(dealer);
                if (reply == null) {
                    if (received == 0) {
                        return false;
                    }
                    throw new MalformedEventException("replay from " + replayEndpoint + " for " + instance
                            + " stopped answering after " + received + " messages (" + timeoutMillis + " ms)");
                }
                dealer.setReceiveTimeOut(timeoutMillis);
                try {
                    if (reply.size() != 3) {
                        throw new MalformedEventException("replay message of " + reply.size() + " frames from "
                                + replayEndpoint + " (need empty, sequence, payload)");
                    }
                    reply.pop();
                    byte[] seqFrame = reply.pop().getData();
                    byte[] payload = reply.pop().getData();
                    if (VllmKvEventCodec.readSequence(seqFrame) == VllmKvEventCodec.END_OF_REPLAY) {
                        return true;
                    }
                    received++;
                    each.accept(VllmKvEventCodec.decode(instance, topic, seqFrame, payload));
                } finally {
                    reply.destroy();
                }
            }
        } finally {
            context.destroySocket(dealer);
        }
    }

    @Override
    public void close() {
        context.close();
    }
}
