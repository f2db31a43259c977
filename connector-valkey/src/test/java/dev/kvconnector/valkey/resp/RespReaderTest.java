package dev.kvconnector.valkey.resp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import java.io.ByteArrayInputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The reply parser on exact byte sequences: every RESP3 type, and the limits that guard against hostile servers. */
class RespReaderTest {
    static final Endpoint ENDPOINT = new Endpoint("10.1.2.3", 6379, "valkey://10.1.2.3:6379");

    static RespReader reader(byte[] bytes, int bufferBytes, long maxReply, int maxElements) {
        InFlight f = new InFlight(0);
        f.begin("get", "k1");
        return new RespReader(Channels.newChannel(new ByteArrayInputStream(bytes)), bufferBytes, maxReply,
                maxElements, ENDPOINT, f);
    }

    static RespReader reader(String s) {
        return reader(s.getBytes(StandardCharsets.ISO_8859_1), 64, 1 << 20, 1000);
    }

    @Test
    void bulkReplyIsReadIntoTheSegmentAcrossManyBufferFills() {
        byte[] payload = new byte[100_000];
        for (int i = 0; i < payload.length; i++) {
            payload[i] = (byte) (i * 7);
        }
        byte[] reply = concat(("$" + payload.length + "\r\n").getBytes(StandardCharsets.US_ASCII), payload,
                "\r\n:5\r\n".getBytes(StandardCharsets.US_ASCII));
        try (Arena arena = Arena.ofConfined()) {
            for (MemorySegment dst : new MemorySegment[] {arena.allocate(payload.length),
                    MemorySegment.ofArray(new byte[payload.length])}) {
                RespReader r = reader(reply, 64, 1 << 20, 10);
                assertEquals(payload.length, r.readBulkInto(dst));
                assertEquals(-1, dst.mismatch(MemorySegment.ofArray(payload)));
                assertEquals(5, r.readInteger(), "the reply after the payload is intact");
            }
        }
    }

    @Test
    void tooSmallDestinationGetsTheSizeAndTheStreamStaysAligned() {
        RespReader r = reader("$10\r\n0123456789\r\n+OK\r\n");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(4);
            long res = r.readBulkInto(dst);
            assertEquals(10, GetResult.requiredSize(res));
            assertEquals(0, dst.get(ValueLayout.JAVA_INT, 0));
            assertEquals(1, r.readStatus());
        }
    }

    @Test
    void nullRepliesOfBothProtocolsAreMisses() {
        RespReader r = reader("$-1\r\n_\r\n");
        assertEquals(GetResult.MISS, r.readBulkInto(MemorySegment.NULL));
        assertEquals(GetResult.MISS, r.readBulkInto(MemorySegment.NULL));
    }

    @Test
    void errorRepliesAreResultsWithTheMessage() {
        RespReader r = reader("-ERR boom\r\n!21\r\nSYNTAX invalid syntax\r\n:1\r\n");
        assertEquals(RespReader.REPLY_ERROR, r.readBulkInto(MemorySegment.NULL));
        assertEquals("ERR boom", r.lastError());
        assertEquals(RespReader.REPLY_ERROR, r.readStatus());
        assertEquals("SYNTAX invalid syntax", r.lastError());
        assertEquals(1, r.readInteger());
    }

    @Test
    void pushMessagesAndAttributesBeforeAReplyAreSkipped() {
        RespReader r = reader(">3\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n_\r\n"
                + "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n"
                + ":42\r\n");
        assertEquals(42, r.readInteger());
    }

    @Test
    void skipReplyWalksEveryRespThreeType() {
        String all = "*12\r\n+s\r\n:-7\r\n$3\r\nabc\r\n,3.14\r\n#t\r\n(3492890328409238509324850943850943825024385\r\n"
                + "_\r\n=7\r\ntxt:abc\r\n%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n|1\r\n+a\r\n+b\r\n*-1\r\n$-1\r\n"
                + "*0\r\n:5\r\n";
        RespReader r = reader(all);
        assertEquals(0, r.skipReply());
        assertEquals(5, r.readInteger(), "the next reply starts exactly after the aggregate");
    }

    @Test
    void verbatimTextDropsItsFormatPrefix() {
        RespReader r = reader("=15\r\ntxt:Some string\r\n$5\r\nhello\r\n");
        assertEquals("Some string", r.readText());
        assertEquals("hello", r.readText());
    }

    @Test
    void stringMapsReadFromArraysAndMaps() {
        RespReader r = reader("*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n%1\r\n$1\r\nc\r\n$1\r\n3\r\n"
                + "-NOPERM no\r\n");
        assertEquals(Map.of("a", "1", "b", "2"), r.readStringMap());
        assertEquals(Map.of("c", "3"), r.readStringMap());
        assertNull(r.readStringMap());
        assertEquals("NOPERM no", r.lastError());
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "$999999999999\r\n",          // beyond max-reply
        "$-2\r\n",                     // negative length
        "*2000\r\n",                   // beyond max elements
        "%600\r\n",                    // a map of 1200 members
        "$1234567890123456789012\r\n", // overflowing number
        "$\r\n",                       // empty number
        "$1x\r\n",                     // non-digit
        "$3\r\nabcd\r\n",              // length disagrees with payload
        "$3\rabc\r\n",                 // CR without LF
        ":1\n",                        // LF without CR
        "?what\r\n",                   // unknown type
        "_x\r\n",                      // RESP3 null with a body
    })
    void malformedOrHostileRepliesAreProtocolErrorsNamingTheServer(String reply) {
        RespReader r = reader(reply);
        KVException e = assertThrows(KVException.class, () -> {
            while (true) {
                r.skipReply();
            }
        });
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("10.1.2.3:6379"), e.getMessage());
        assertEquals("get", e.operation());
        assertEquals("k1", e.key());
    }

    @Test
    void nestedAggregatesCountAgainstTheElementLimitWithoutRecursion() {
        StringBuilder deep = new StringBuilder();
        for (int i = 0; i < 5000; i++) {
            deep.append("*1\r\n");
        }
        deep.append(":1\r\n");
        RespReader r = reader(deep.toString().getBytes(StandardCharsets.US_ASCII), 64, 1 << 20, 1000);
        KVException e = assertThrows(KVException.class, r::skipReply);
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
        RespReader ok = reader(deep.toString().getBytes(StandardCharsets.US_ASCII), 64, 1 << 20, 10_000);
        assertEquals(0, ok.skipReply());
    }

    @Test
    void clusterSlotsReplyReadsAsATree() {
        RespReader r = reader("*1\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:30001\r\n$2\r\nid\r\n"
                + "-ERR This instance has cluster support disabled\r\n");
        assertEquals(java.util.List.of(java.util.List.of(0L, 5460L, java.util.List.of("127.0.0.1", 30001L, "id"))),
                r.readTree());
        r.clearError();
        assertNull(r.readTree());
        assertEquals("ERR This instance has cluster support disabled", r.lastError());
    }

    @Test
    void treeDeeperThanEightLevelsIsAProtocolError() {
        KVException e = assertThrows(KVException.class, () -> reader("*1\r\n".repeat(12) + ":1\r\n").readTree());
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
        assertTrue(e.getMessage().contains("deeper than 8"), e.getMessage());
    }

    @Test
    void lineLongerThanTheBufferIsAProtocolError() {
        RespReader r = reader(("+" + "x".repeat(100) + "\r\n").getBytes(StandardCharsets.US_ASCII), 64, 1 << 20, 10);
        KVException e = assertThrows(KVException.class, r::readStatus);
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
        assertTrue(e.getMessage().contains("longer than 64 bytes"), e.getMessage());
    }

    @Test
    void unexpectedTypeForAGetIsAProtocolError() {
        KVException e = assertThrows(KVException.class, () -> reader("*1\r\n:1\r\n").readBulkInto(MemorySegment.NULL));
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
        assertTrue(e.getMessage().contains("'*'"), e.getMessage());
    }

    @Test
    void endOfStreamMidPayloadIsUnreachableWithByteCounts() {
        byte[] reply = concat("$100000\r\n".getBytes(StandardCharsets.US_ASCII), new byte[50_000]);
        try (Arena arena = Arena.ofConfined()) {
            KVException e = assertThrows(KVException.class,
                    () -> reader(reply, 64, 1 << 20, 10).readBulkInto(arena.allocate(100_000)));
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("50000 of 100000"), e.getMessage());
        }
    }

    @Test
    void oneByteAtATimeChannelStillParses() {
        byte[] all = "*2\r\n$3\r\nfoo\r\n:12\r\n$5\r\nhello\r\n".getBytes(StandardCharsets.US_ASCII);
        ReadableByteChannel trickle = new ReadableByteChannel() {
            int pos;

            @Override
            public int read(ByteBuffer dst) {
                if (pos == all.length) {
                    return -1;
                }
                dst.put(all[pos++]);
                return 1;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {
            }
        };
        InFlight f = new InFlight(0);
        RespReader r = new RespReader(trickle, 16, 1 << 20, 100, ENDPOINT, f);
        assertEquals(0, r.skipReply());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(5);
            assertEquals(5, r.readBulkInto(dst));
            assertEquals("hello", new String(dst.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII));
        }
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int off = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, off, p.length);
            off += p.length;
        }
        return out;
    }
}
