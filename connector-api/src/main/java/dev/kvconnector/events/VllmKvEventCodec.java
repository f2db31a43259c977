package dev.kvconnector.events;

import dev.kvconnector.connector.MissReason;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;

/**
 * vLLM's KV-event wire format ({@code vllm/distributed/kv_events.py}), the one place that writes it, and with
 * {@link KvEventReader} (its payload reader) the one that reads it: the publisher ({@link ZmqKvEventPublisher}) and
 * every subscriber (the proxy's) use these two.
 *
 * <p>A message is three ZMQ frames: the topic, the batch's sequence number (8 bytes, big-endian) and the payload, a
 * msgpack {@code KVEventBatch}. The payload is written as vLLM's array-like structs (the form vLLM 0.9 to 0.11 and
 * its example subscriber use): {@code [ts, [event...]]}, each event {@code [tag, fields...]}:
 * <ul>
 *   <li>{@code ["BlockStored", [hash], parent_hash|nil, [], block_size, nil, medium]}: a {@link KvEvent.Stored};
 *       hashes are msgpack binaries (vLLM's bytes {@code ExternalBlockHash}), the token ids are left empty (the hash
 *       already binds them), {@code block_size} is the chunk's tokens and {@code medium} the store URI;</li>
 *   <li>{@code ["BlockRemoved", [hash], medium]}: a {@link KvEvent.Removed}, and also a {@link KvEvent.LoadFailed}
 *       other than {@code TIMED_OUT}, since a chunk that could not be loaded is, for a router, a chunk not there;</li>
 *   <li>{@code ["AllBlocksCleared"]}: {@link KvEvent.AllCleared}.</li>
 * </ul>
 * The removal reason, the key scheme and the layer count do not travel (vLLM's events have no field for them); a
 * decoded removal says {@link RemovalReason#REMOVED}, a decoded store has no scheme and -1 layers. The reader also
 * takes vLLM's newer map form ({@code {"type": "BlockStored", ...}}), integer hashes (older vLLM; as 16 hex digits),
 * and fields it does not know, which it skips.
 *
 * <p>kvconnector's addition, invisible to vLLM's subscribers (which match topics by prefix and ignore the rest): the
 * topic frame is {@code <topic>;epoch=<n>;chunk_tokens=<n>;root=<hex>}, so a subscriber learns the publisher's epoch
 * (a restart) and how its prompts hash from any message. A topic without them reads as epoch 0.
 */
public final class VllmKvEventCodec {
    /** The sequence frame of the replay's end marker (-1), as vLLM's publisher sends it. */
    public static final long END_OF_REPLAY = -1;
    private static final HexFormat HEX = HexFormat.of();
    private final MsgPack.Writer writer = new MsgPack.Writer();

    /** A codec; its writer is reused, so one per publishing thread. Decoding is static. */
    public VllmKvEventCodec() {
    }

    /** The topic frame for {@code source} under {@code topic}. */
    public static String topicFrame(String topic, KvEventSource source) {
        return topic + ";epoch=" + source.epoch() + ";chunk_tokens=" + source.chunkTokens()
                + (source.rootHash() == null ? "" : ";root=" + source.rootHash());
    }

    /** The sequence frame: 8 bytes, big-endian, as vLLM sends it. */
    public static byte[] sequenceFrame(long sequence) {
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (sequence >>> (56 - 8 * i));
        }
        return b;
    }

    /** Reads a sequence frame; anything but 8 bytes is malformed. */
    public static long readSequence(byte[] frame) throws MalformedEventException {
        if (frame == null || frame.length != 8) {
            throw new MalformedEventException("sequence frame of " + (frame == null ? "no" : frame.length)
                    + " bytes (need 8)");
        }
        long v = 0;
        for (byte b : frame) {
            v = (v << 8) | (b & 0xff);
        }
        return v;
    }

    /** Encodes {@code events} sent at {@code timestampSeconds} as a {@code KVEventBatch} payload. */
    public byte[] encode(List<KvEvent> events, double timestampSeconds) {
        int n = 0;
        for (KvEvent e : events) {
            n += onWire(e) ? 1 : 0;
        }
        MsgPack.Writer w = writer.reset().array(2).float64(timestampSeconds).array(n);
        for (KvEvent e : events) {
            switch (e) {
                case KvEvent.Stored s -> {
                    w.array(7).string("BlockStored").array(1).binary(hash(s.chunkHash()));
                    if (s.parentHash() == null) {
                        w.nil();
                    } else {
                        w.binary(hash(s.parentHash()));
                    }
                    w.array(0).integer(s.tokens()).nil().string(s.storeUri());
                }
                case KvEvent.Removed r -> w.array(3).string("BlockRemoved").array(1).binary(hash(r.chunkHash()))
                        .string(r.storeUri());
                case KvEvent.LoadFailed f -> {
                    if (onWire(f)) {
                        w.array(3).string("BlockRemoved").array(1).binary(hash(f.chunkHash())).string(f.storeUri());
                    }
                }
                case KvEvent.AllCleared c -> w.array(1).string("AllBlocksCleared");
            }
        }
        return w.toByteArray();
    }

    private static boolean onWire(KvEvent e) {
        return !(e instanceof KvEvent.LoadFailed f) || (f.chunkHash() != null && f.reason() != MissReason.TIMED_OUT);
    }

    private static byte[] hash(String hex) {
        return HEX.parseHex(hex);
    }

    /** Parses a topic frame: epoch, chunk size and root where present (0, 0 and null where not). */
    public static KvEventSource parseTopic(String instance, byte[] topicFrame) throws MalformedEventException {
        String topic = new String(topicFrame, StandardCharsets.UTF_8);
        long epoch = 0;
        int chunkTokens = 0;
        String root = null;
        String[] parts = topic.split(";");
        try {
            for (int i = 1; i < parts.length; i++) {
                String p = parts[i];
                if (p.startsWith("epoch=")) {
                    epoch = Long.parseLong(p.substring(6));
                } else if (p.startsWith("chunk_tokens=")) {
                    chunkTokens = Integer.parseInt(p.substring(13));
                } else if (p.startsWith("root=")) {
                    root = p.substring(5);
                    HEX.parseHex(root);
                }
            }
        } catch (IllegalArgumentException e) {
            throw new MalformedEventException("topic frame '" + topic + "' of " + instance + ": " + e.getMessage());
        }
        return new KvEventSource(instance, epoch, null, null, chunkTokens, root);
    }

    /**
     * Decodes one message from {@code instance}: its three frames. Every decoded event carries the batch's epoch
     * and sequence. A subscriber that takes many messages a second reads them with a {@link KvEventReader} instead,
     * which this uses once.
     */
    public static KvEventBatch decode(String instance, byte[] topicFrame, byte[] sequenceFrame, byte[] payload)
            throws MalformedEventException {
        KvEventReader reader = new KvEventReader();
        reader.read(instance, topicFrame, sequenceFrame, payload);
        return reader.toBatch();
    }
}
