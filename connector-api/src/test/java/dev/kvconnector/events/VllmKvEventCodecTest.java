package dev.kvconnector.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.MissReason;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/** vLLM's KVEventBatch, as written by the publisher and read by subscribers, byte for byte where it matters. */
class VllmKvEventCodecTest {
    private static final String H1 = "11".repeat(32);
    private static final String H2 = "22".repeat(32);
    private static final String ROOT = "aa".repeat(32);
    private static final KvEventSource SOURCE = new KvEventSource("e", 77, "shm:/x", "kvc-v1", 256, ROOT);
    private static final byte[] TOPIC = VllmKvEventCodec.topicFrame("kv", SOURCE).getBytes(StandardCharsets.UTF_8);

    @Test
    void storedRemovedAndClearedRoundTripWithTheTopicsEpochAndRoot() throws Exception {
        List<KvEvent> in = List.of(
                new KvEvent.Stored(1, 0, "e", "shm:/x", "kvc-v1", H1, ROOT, 256, 24),
                new KvEvent.Removed(1, 1, "e", "shm:/x", H2, RemovalReason.CONSUMED),
                new KvEvent.LoadFailed(1, 2, "e", "shm:/x", H1, MissReason.CORRUPT, 300),
                new KvEvent.LoadFailed(1, 3, "e", "shm:/x", H2, MissReason.TIMED_OUT, 300),
                new KvEvent.AllCleared(1, 4, "e"));
        byte[] payload = new VllmKvEventCodec().encode(in, 1234.5);
        KvEventBatch b = VllmKvEventCodec.decode("inst", TOPIC, VllmKvEventCodec.sequenceFrame(9), payload);
        assertEquals(9, b.sequence());
        assertEquals(77, b.epoch());
        assertEquals(256, b.source().chunkTokens());
        assertEquals(ROOT, b.source().rootHash());
        assertEquals(1234.5, b.timestampSeconds());
        assertEquals(List.of(
                new KvEvent.Stored(77, 9, "inst", "shm:/x", null, H1, ROOT, 256, -1),
                new KvEvent.Removed(77, 9, "inst", "shm:/x", H2, RemovalReason.REMOVED),
                // A load failure is a removal for a router; a timeout says nothing about presence and stays home.
                new KvEvent.Removed(77, 9, "inst", "shm:/x", H1, RemovalReason.REMOVED),
                new KvEvent.AllCleared(77, 9, "inst")), b.events());
    }

    @Test
    void theBlockStoredIsVllmsArrayLikeStructWithBytesHashes() {
        byte[] payload = new VllmKvEventCodec().encode(
                List.of(new KvEvent.Stored(1, 0, "e", "GPU", null, "01".repeat(2), null, 16, -1)), 0.0);
        // [ts, [["BlockStored", [h], nil, [], 16, nil, "GPU"]]] in msgpack.
        String hex = HexFormat.of().formatHex(payload);
        assertEquals("92" + "cb0000000000000000" + "91" + "97" + "ab426c6f636b53746f726564" + "91" + "c4020101"
                + "c0" + "90" + "10" + "c0" + "a3475055", hex);
    }

    @Test
    void vllmsMapFormAndIntegerHashesDecodeAndUnknownFieldsAreSkipped() throws Exception {
        MsgPack.Writer w = new MsgPack.Writer();
        // {"ts": 2.0, "events": [{"type": "BlockStored", "block_hashes": [5, 6], "parent_block_hash": nil,
        //  "token_ids": [1], "block_size": 16, "medium": "GPU", "group_idx": 0}], "data_parallel_rank": 0}
        byte[] map = mapBatch(w);
        KvEventBatch b = VllmKvEventCodec.decode("v", "".getBytes(StandardCharsets.UTF_8),
                VllmKvEventCodec.sequenceFrame(0), map);
        assertEquals(0, b.epoch());
        assertNull(b.source().rootHash());
        assertEquals(2, b.events().size());
        KvEvent.Stored second = assertInstanceOf(KvEvent.Stored.class, b.events().get(1));
        assertEquals("0000000000000006", second.chunkHash());
        assertEquals("0000000000000005", second.parentHash());
        assertEquals("GPU", second.storeUri());
    }

    private static byte[] mapBatch(MsgPack.Writer w) {
        // The writer has no map method (the publisher writes arrays); a map header is one byte 0x8N here.
        byte[] ts = w.reset().string("ts").float64(2.0).string("events").array(1).toByteArray();
        byte[] ev = w.reset().string("type").string("BlockStored").string("block_hashes").array(2).integer(5)
                .integer(6).string("parent_block_hash").nil().string("token_ids").array(1).integer(1)
                .string("block_size").integer(16).string("medium").string("GPU").string("group_idx").integer(0)
                .toByteArray();
        byte[] tail = w.reset().string("data_parallel_rank").integer(0).toByteArray();
        byte[] out = new byte[1 + ts.length + 1 + ev.length + tail.length];
        int k = 0;
        out[k++] = (byte) 0x83;
        System.arraycopy(ts, 0, out, k, ts.length);
        k += ts.length;
        out[k++] = (byte) 0x87;
        System.arraycopy(ev, 0, out, k, ev.length);
        k += ev.length;
        System.arraycopy(tail, 0, out, k, tail.length);
        return out;
    }

    @Test
    void truncatedWrongTypedAndUnknownMessagesAreMalformedNotCrashes() {
        byte[] good = new VllmKvEventCodec().encode(
                List.of(new KvEvent.Stored(1, 0, "e", "shm:/x", null, H1, null, 16, -1)), 1.0);
        byte[] seq = VllmKvEventCodec.sequenceFrame(1);
        for (int cut = 0; cut < good.length; cut++) {
            byte[] truncated = java.util.Arrays.copyOf(good, cut);
            assertThrows(MalformedEventException.class, () -> VllmKvEventCodec.decode("e", TOPIC, seq, truncated),
                    "cut at " + cut);
        }
        byte[] unknownTag = new MsgPack.Writer().array(2).float64(0).array(1).array(1).string("BlockExploded")
                .toByteArray();
        MalformedEventException e = assertThrows(MalformedEventException.class,
                () -> VllmKvEventCodec.decode("e", TOPIC, seq, unknownTag));
        assertTrue(e.getMessage().contains("BlockExploded"), e.getMessage());
        assertThrows(MalformedEventException.class, () -> VllmKvEventCodec.decode("e", TOPIC, new byte[3], good));
        assertThrows(MalformedEventException.class, () -> VllmKvEventCodec.decode("e",
                "kv;epoch=abc".getBytes(StandardCharsets.UTF_8), seq, good));
        byte[] deep = new byte[200];
        java.util.Arrays.fill(deep, (byte) 0x91);
        assertThrows(MalformedEventException.class, () -> VllmKvEventCodec.decode("e", TOPIC, seq, deep));
    }

    @Test
    void theSequenceFrameIsEightBytesBigEndian() throws Exception {
        assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, 1, 2}, VllmKvEventCodec.sequenceFrame(258));
        assertEquals(-1, VllmKvEventCodec.readSequence(VllmKvEventCodec.sequenceFrame(-1)));
    }
}
