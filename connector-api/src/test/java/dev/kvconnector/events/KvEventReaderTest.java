package dev.kvconnector.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The allocation-light reader of vLLM's KV-event messages, against the records {@link VllmKvEventCodec} gives. */
class KvEventReaderTest {
    private static final String ROOT = "aa".repeat(32);
    private static final byte[] TOPIC = VllmKvEventCodec.topicFrame("kv",
            new KvEventSource("e", 5, "GPU", "kvc-v1", 16, ROOT)).getBytes(StandardCharsets.UTF_8);

    private static String hash(int i) {
        return String.format("%064x", 0x1234_5678_9abc_def0L * (i + 1));
    }

    private static byte[] message(int first, int count) {
        List<KvEvent> events = new ArrayList<>();
        for (int i = first; i < first + count; i++) {
            events.add(new KvEvent.Stored(1, 0, "e", "GPU", null, hash(i), null, 16, -1));
            events.add(new KvEvent.Removed(1, 0, "e", "valkey://s:6379", hash(i - 1), RemovalReason.EVICTED));
        }
        return new VllmKvEventCodec().encode(events, 3.5);
    }

    @Test
    void aMessageReadsAsTheCodecsRecordsAndItsHashKeysAreTheHexHashesKeys() throws Exception {
        KvEventReader r = new KvEventReader();
        byte[] payload = message(0, 3);
        r.read("e", TOPIC, VllmKvEventCodec.sequenceFrame(4), payload);
        assertEquals(VllmKvEventCodec.decode("e", TOPIC, VllmKvEventCodec.sequenceFrame(4), payload), r.toBatch());
        assertEquals(6, r.size());
        assertEquals(4, r.sequence());
        assertEquals(5, r.source().epoch());
        assertEquals(3.5, r.timestampSeconds());
        assertEquals(KvEventReader.Kind.STORED, r.kind(0));
        assertEquals(KvEventReader.Kind.REMOVED, r.kind(1));
        for (int i = 0; i < r.size(); i++) {
            assertEquals(KvEventReader.hashKey(r.hashHex(i)), r.hashKey(i));
        }
        assertEquals(Long.parseUnsignedLong(hash(0).substring(0, 16), 16), r.hashKey(0));
        assertSame(r.medium(0), r.medium(2), "one String per medium");
        assertThrows(IndexOutOfBoundsException.class, () -> r.kind(6));
    }

    @Test
    void integerAndShortHashesKeyAsTheirHexDoes() throws Exception {
        KvEventReader r = new KvEventReader();
        r.read("v", new byte[0], VllmKvEventCodec.sequenceFrame(0), integerAndShortHashesMessage());
        assertEquals("fffffffffffffff9", r.hashHex(0));
        assertEquals(-7, r.hashKey(0));
        assertEquals("01020304", r.hashHex(1));
        assertEquals(KvEventReader.hashKey("01020304"), r.hashKey(1));
        assertNull(r.medium(1));
    }

    /** vLLM's map form, an integer hash and a 4-byte one: {@code [ts, [{type, block_hashes: [-7, b"\1\2\3\4"]}]]}. */
    private static byte[] integerAndShortHashesMessage() {
        MsgPack.Writer w = new MsgPack.Writer();
        byte[] head = w.reset().array(2).float64(1.0).array(1).toByteArray();
        byte[] body = w.reset().string("type").string("BlockRemoved").string("block_hashes").array(2).integer(-7)
                .binary(new byte[] {1, 2, 3, 4}).toByteArray();
        byte[] payload = new byte[head.length + 1 + body.length];
        System.arraycopy(head, 0, payload, 0, head.length);
        payload[head.length] = (byte) 0x82;
        System.arraycopy(body, 0, payload, head.length + 1, body.length);
        return payload;
    }

    @Test
    void aMalformedMessageLeavesNothingReadAndTheNextOneReadsWhole() throws Exception {
        KvEventReader r = new KvEventReader();
        r.read("e", TOPIC, VllmKvEventCodec.sequenceFrame(1), message(0, 2));
        byte[] good = message(10, 2);
        byte[] truncated = java.util.Arrays.copyOf(good, good.length - 5);
        assertThrows(MalformedEventException.class,
                () -> r.read("e", TOPIC, VllmKvEventCodec.sequenceFrame(2), truncated));
        assertEquals(0, r.size());
        r.read("e", TOPIC, VllmKvEventCodec.sequenceFrame(2), good);
        assertEquals(4, r.size());
        assertEquals(hash(10), r.hashHex(0));
    }

    @Test
    void countEventsReadsTheBatchsCountFromItsHeaderAlone() {
        assertEquals(6, KvEventReader.countEvents(message(0, 3)));
        assertEquals(1, KvEventReader.countEvents(integerAndShortHashesMessage()));
        byte[] entries = new MsgPack.Writer().string("ts").float64(1.0).string("events").array(2).array(1)
                .string("AllBlocksCleared").array(1).string("AllBlocksCleared").toByteArray();
        byte[] mapForm = new byte[1 + entries.length];
        mapForm[0] = (byte) 0x82;
        System.arraycopy(entries, 0, mapForm, 1, entries.length);
        assertEquals(2, KvEventReader.countEvents(mapForm), "vLLM's map form");
        assertEquals(-1, KvEventReader.countEvents(new byte[] {(byte) 0x91, 0}));
        assertEquals(-1, KvEventReader.countEvents(null));
    }

    @Test
    void aNewTopicFrameIsParsedAgain() throws Exception {
        KvEventReader r = new KvEventReader();
        r.read("e", TOPIC, VllmKvEventCodec.sequenceFrame(1), message(0, 1));
        byte[] restarted = VllmKvEventCodec.topicFrame("kv", new KvEventSource("e", 6, "GPU", "kvc-v1", 16, ROOT))
                .getBytes(StandardCharsets.UTF_8);
        r.read("e", restarted, VllmKvEventCodec.sequenceFrame(0), message(0, 1));
        assertEquals(6, r.source().epoch());
    }

    @Test
    void readingAllocatesNothingOnceItsArraysHaveGrown() throws Exception {
        KvEventReader r = new KvEventReader();
        List<byte[]> payloads = new ArrayList<>();
        for (int m = 0; m < 16; m++) {
            payloads.add(message(50 * m, 50));
        }
        byte[] seq = VllmKvEventCodec.sequenceFrame(1);
        long keys = 0;
        for (int i = 0; i < 20_000; i++) {
            keys += readAll(r, payloads.get(i % payloads.size()), seq);
        }
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        long before = threads.getCurrentThreadAllocatedBytes();
        int messages = 2_000;
        for (int i = 0; i < messages; i++) {
            keys += readAll(r, payloads.get(i % payloads.size()), seq);
        }
        long perMessage = (threads.getCurrentThreadAllocatedBytes() - before) / messages;
        assertTrue(perMessage < 16, perMessage + " bytes allocated per message of 100 events (keys " + keys + ")");
    }

    private static long readAll(KvEventReader r, byte[] payload, byte[] seq) throws MalformedEventException {
        r.read("e", TOPIC, seq, payload);
        long sum = 0;
        for (int i = 0; i < r.size(); i++) {
            sum += r.hashKey(i) + r.kind(i).ordinal() + (r.medium(i) == null ? 0 : 1);
        }
        return sum;
    }
}
