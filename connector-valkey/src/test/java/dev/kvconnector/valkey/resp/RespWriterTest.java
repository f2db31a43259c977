package dev.kvconnector.valkey.resp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The exact bytes commands encode to, whatever path a value takes (inlined, written from its memory, streamed). */
class RespWriterTest {
    private static final byte[] SET = RespWriter.token("SET");

    /**
     * A test double of a socket that accepts at most {@code chunk} bytes per write and records them, and the
     * capacity of each buffer it was handed.
     */
    static final class RecordingChannelTestDouble implements WritableByteChannel {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final List<Integer> capacities = new ArrayList<>();
        final int chunk;
        int writes;

        RecordingChannelTestDouble(int chunk) {
            this.chunk = chunk;
        }

        @Override
        public int write(ByteBuffer src) {
            writes++;
            capacities.add(src.capacity());
            int n = Math.min(chunk, src.remaining());
            for (int i = 0; i < n; i++) {
                out.write(src.get());
            }
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    private static RespWriter writer(RecordingChannelTestDouble ch, int buffer) {
        return new RespWriter(ch, buffer, RespReaderTest.ENDPOINT, new InFlight(0));
    }

    private static byte[] expectedSet(String key, byte[] value) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        b.writeBytes(("*3\r\n$3\r\nSET\r\n$" + k.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        b.writeBytes(k);
        b.writeBytes(("\r\n$" + value.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        b.writeBytes(value);
        b.writeBytes("\r\n".getBytes(StandardCharsets.US_ASCII));
        return b.toByteArray();
    }

    @Test
    void pipelineOfSetsEncodesEveryValueKindExactly() {
        try (Arena arena = Arena.ofConfined()) {
            byte[][] values = {new byte[0], new byte[] {'*'}, new byte[5000], new byte[70_000], new byte[70_000]};
            for (int i = 0; i < values.length; i++) {
                for (int j = 0; j < values[i].length; j++) {
                    values[i][j] = (byte) (i * 31 + j);
                }
            }
            MemorySegment nativeBig = arena.allocate(values[3].length);
            MemorySegment.copy(values[3], 0, nativeBig, ValueLayout.JAVA_BYTE, 0, values[3].length);
            MemorySegment nativeMid = arena.allocate(values[2].length);
            MemorySegment.copy(values[2], 0, nativeMid, ValueLayout.JAVA_BYTE, 0, values[2].length);
            MemorySegment[] segs = {MemorySegment.ofArray(values[0]), MemorySegment.ofArray(values[1]), nativeMid,
                    nativeBig, MemorySegment.ofArray(values[4])};
            String[] keys = {"k0", "ключ", "k2", "k3", "k4"};
            RecordingChannelTestDouble ch = new RecordingChannelTestDouble(1000);
            RespWriter w = writer(ch, 1024);
            ByteArrayOutputStream expected = new ByteArrayOutputStream();
            for (int round = 0; round < 2; round++) {
                for (int i = 0; i < segs.length; i++) {
                    w.array(3).raw(SET).bulk(keys[i]).bulk(segs[i]);
                    expected.writeBytes(expectedSet(keys[i], values[i]));
                }
                w.array(2).raw(SET).bulk(-1234567890123L);
                expected.writeBytes("*2\r\n$3\r\nSET\r\n$14\r\n-1234567890123\r\n".getBytes(StandardCharsets.US_ASCII));
                w.flush();
            }
            assertArrayEquals(expected.toByteArray(), ch.out.toByteArray());
        }
    }

    @Test
    void sameNativeSegmentTwiceInOnePipelineIsSentTwiceFromItsOwnMemory() {
        try (Arena arena = Arena.ofConfined()) {
            byte[] v = new byte[70_000];
            v[0] = '$';
            v[69_999] = 7;
            MemorySegment seg = arena.allocate(v.length);
            MemorySegment.copy(v, 0, seg, ValueLayout.JAVA_BYTE, 0, v.length);
            RecordingChannelTestDouble ch = new RecordingChannelTestDouble(Integer.MAX_VALUE);
            RespWriter w = writer(ch, 4096);
            w.array(3).raw(SET).bulk("a").bulk(seg).array(3).raw(SET).bulk("b").bulk(seg).flush();
            ByteArrayOutputStream expected = new ByteArrayOutputStream();
            expected.writeBytes(expectedSet("a", v));
            expected.writeBytes(expectedSet("b", v));
            assertArrayEquals(expected.toByteArray(), ch.out.toByteArray());
            // Header, value, CRLF and header, value, CRLF: each value from a view of the segment, not a copy.
            assertEquals(List.of(4096, v.length, 4096, v.length, 4096), ch.capacities);
        }
    }

    @Test
    void pipelineOfSmallCommandsLeavesInOneWrite() {
        RecordingChannelTestDouble ch = new RecordingChannelTestDouble(Integer.MAX_VALUE);
        RespWriter w = writer(ch, 4096);
        for (int i = 0; i < 20; i++) {
            w.array(3).raw(SET).bulk("key-" + i).bulk(MemorySegment.ofArray(new byte[100]));
        }
        w.flush();
        assertEquals(1, ch.writes);
    }

    @Test
    void utf8LengthCountsSurrogatePairsAsFourBytes() {
        for (String s : new String[] {"", "abc", "é", "ключ", "🔑", "a🔑b€", "\ud800"}) {
            assertEquals(s.getBytes(StandardCharsets.UTF_8).length, RespWriter.utf8Length(s), s);
        }
        assertTrue(RespWriter.utf8Length("x".repeat(100)) == 100);
    }
}
