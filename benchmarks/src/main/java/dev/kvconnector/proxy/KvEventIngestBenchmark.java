package dev.kvconnector.proxy;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventReader;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.MalformedEventException;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.events.VllmKvEventCodec;
import dev.kvconnector.testkit.KvEventFloodPublisher;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one KV-event message costs the proxy's apply thread once it is off the socket: reading vLLM's wire format and
 * applying it to the {@link PrefixIndex} through the {@link KvEventFeed}. A message is 100 events, as the flood of
 * {@code KvEventFloodBenchmark} batches them at 10^5 a second: 50 stores of new chunks and 50 removals of chunks stored
 * 10,000 before, so the index holds 10,000 chunks throughout. {@link #readAndApply} is the proxy's path (a
 * {@link KvEventReader}); {@link #decodeAndApply} decodes into records first, as the proxy did before and still does
 * for replays. Run with {@code -prof gc} for the bytes allocated per message; divide by 100 for an event.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class KvEventIngestBenchmark {
    private static final int EVENTS = 100;
    private static final int WINDOW = 10_000;
    /** Chunks in one cycle of the pre-encoded messages, a multiple of the stores per message above the window. */
    private static final int CYCLE = 2 * WINDOW;
    private static final String MEDIUM = "GPU";

    private final List<byte[]> payloads = new ArrayList<>();
    private final KvEventReader reader = new KvEventReader();
    private final byte[] sequenceFrame = new byte[8];
    private byte[] topic;
    private KvEventFeed feed;
    private PrefixIndex index;
    private long sequence;
    private int next;

    /** Encodes a cycle of messages and seeds the index with the window they start from. */
    @Setup(Level.Trial)
    public void setUp() throws MalformedEventException {
        KvEventSource source = new KvEventSource("e", 1, MEDIUM, "kvc-v1", 256, "ab".repeat(32));
        topic = VllmKvEventCodec.topicFrame("kv", source).getBytes(StandardCharsets.UTF_8);
        VllmKvEventCodec codec = new VllmKvEventCodec();
        List<KvEvent> seed = new ArrayList<>();
        for (int c = CYCLE - WINDOW; c < CYCLE; c++) {
            seed.add(stored(c));
        }
        for (int first = 0; first < CYCLE; first += EVENTS / 2) {
            List<KvEvent> events = new ArrayList<>(EVENTS);
            for (int c = first; c < first + EVENTS / 2; c++) {
                events.add(stored(c));
                events.add(new KvEvent.Removed(1, 0, "e", MEDIUM, KvEventFloodPublisher.chunkHash(
                        Math.floorMod(c - WINDOW, CYCLE)), RemovalReason.EVICTED));
            }
            payloads.add(codec.encode(events, 1.0));
        }
        index = new PrefixIndex();
        feed = new KvEventFeed("e", 0, index, new KvMetrics(), null);
        decodeAndApply(codec.encode(seed, 1.0));
        for (byte[] p : payloads) {
            decodeAndApply(p);
        }
        if (index.size() != WINDOW) {
            throw new IllegalStateException("the index holds " + index.size() + " chunks, not " + WINDOW);
        }
    }

    private static KvEvent stored(int chunk) {
        return new KvEvent.Stored(1, 0, "e", MEDIUM, "kvc-v1", KvEventFloodPublisher.chunkHash(chunk), null, 256, -1);
    }

    private void decodeAndApply(byte[] payload) throws MalformedEventException {
        feed.accept(VllmKvEventCodec.decode("e", topic, VllmKvEventCodec.sequenceFrame(sequence++), payload));
    }

    /** Reads the next message of 100 events with the proxy's reader and applies it. */
    @Benchmark
    public long readAndApply() throws MalformedEventException {
        long seq = sequence++;
        for (int i = 0; i < 8; i++) {
            sequenceFrame[i] = (byte) (seq >>> (56 - 8 * i));
        }
        reader.read("e", topic, sequenceFrame, next());
        feed.accept(reader);
        return index.size();
    }

    /** Decodes the next message of 100 events into records and applies them. */
    @Benchmark
    public long decodeAndApply() throws MalformedEventException {
        decodeAndApply(next());
        return index.size();
    }

    private byte[] next() {
        byte[] p = payloads.get(next);
        next = (next + 1) % payloads.size();
        return p;
    }
}
