package dev.kvconnector.valkey.resp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.ByteArrayInputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * Random and mutated replies through the parser: it either parses them, or fails with a PROTOCOL_ERROR, or (only
 * when the byte source ran dry) with STORE_UNREACHABLE; never with another exception, and never allocating more
 * than its limits allow.
 */
class RespParserFuzzTest {
    private static final long MAX_REPLY = 4096;
    private static final int MAX_ELEMENTS = 256;
    /** Bytes a parse may allocate: the reader's own buffers plus strings bounded by the limits, with slack. */
    private static final long ALLOCATION_BOUND = 4L << 20;

    private static final List<String> VALID = List.of(
            "+OK\r\n", "-ERR x\r\n", ":123\r\n", "$5\r\nhello\r\n", "$-1\r\n", "*-1\r\n", "_\r\n", ",1.5\r\n",
            "#f\r\n", "(123456789012345678901\r\n", "!3\r\nerr\r\n", "=8\r\ntxt:abcd\r\n", "%1\r\n+a\r\n:1\r\n",
            "~2\r\n+a\r\n+b\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n", ">2\r\n+push\r\n:1\r\n$3\r\nend\r\n",
            "*3\r\n$1\r\na\r\n*1\r\n:2\r\n%1\r\n+k\r\n$0\r\n\r\n");

    @Provide
    Arbitrary<byte[]> mutatedReplies() {
        Arbitrary<String> stream = Arbitraries.of(VALID).list().ofMinSize(1).ofMaxSize(8)
                .map(l -> String.join("", l));
        Arbitrary<Integer> position = Arbitraries.integers().between(0, 10_000);
        Arbitrary<Integer> mutation = Arbitraries.integers().between(0, 5);
        Arbitrary<Byte> b = Arbitraries.of((byte) '\r', (byte) '\n', (byte) '-', (byte) '9', (byte) '*', (byte) '$',
                (byte) 0, (byte) 0xff, (byte) '%', (byte) '|', (byte) '>');
        return Combinators.combine(stream, position, mutation, b).as((s, pos, m, by) -> {
            byte[] in = s.getBytes(StandardCharsets.ISO_8859_1);
            int p = pos % in.length;
            return switch (m) {
                case 0 -> in;
                case 1 -> flip(in, p, by);
                case 2 -> java.util.Arrays.copyOf(in, p);
                case 3 -> insert(in, p, "99999999999".getBytes(StandardCharsets.US_ASCII));
                case 4 -> insert(in, p, new byte[] {by});
                default -> insert(in, p, "*100000\r\n".getBytes(StandardCharsets.US_ASCII));
            };
        });
    }

    @Property(tries = 3000)
    void mutatedRepliesFailOnlyWithProtocolErrors(@ForAll("mutatedReplies") byte[] input,
                                                  @ForAll @IntRange(min = 0, max = 5) int method) {
        parseAll(input, method);
    }

    @Property(tries = 2000)
    void randomBytesFailOnlyWithProtocolErrors(@ForAll @Size(max = 600) byte[] input,
                                               @ForAll @IntRange(min = 0, max = 5) int method) {
        parseAll(input, method);
    }

    private static void parseAll(byte[] input, int method) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        long before = mx.getThreadAllocatedBytes(tid);
        InFlight f = new InFlight(0);
        f.begin("fuzz", null);
        ExhaustibleChannelTestDouble ch = new ExhaustibleChannelTestDouble(
                Channels.newChannel(new ByteArrayInputStream(input)));
        RespReader r = new RespReader(ch, 256, MAX_REPLY, MAX_ELEMENTS,
                new Endpoint("fuzz.example", 1, "valkey://fuzz.example:1"), f);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(1024);
            for (int replies = 0; replies <= input.length; replies++) {
                switch (method) {
                    case 0 -> r.skipReply();
                    case 1 -> r.readBulkInto(dst);
                    case 2 -> r.readStatus();
                    case 3 -> r.readText();
                    case 4 -> r.readStringMap();
                    default -> r.readTree();
                }
            }
            throw new AssertionError("more replies than input bytes: the parser consumed nothing");
        } catch (KVException e) {
            if (e.code() == ErrorCode.STORE_UNREACHABLE) {
                assertTrue(ch.exhausted(), "STORE_UNREACHABLE only at the end of the bytes: " + e.getMessage());
            } else {
                assertEquals(ErrorCode.PROTOCOL_ERROR, e.code(), e.getMessage());
            }
        }
        long allocated = mx.getThreadAllocatedBytes(tid) - before;
        assertTrue(allocated < ALLOCATION_BOUND, "allocated " + allocated + " bytes for " + input.length
                + " input bytes");
    }

    private static byte[] flip(byte[] in, int p, byte b) {
        byte[] out = in.clone();
        out[p] = b;
        return out;
    }

    private static byte[] insert(byte[] in, int p, byte[] ins) {
        byte[] out = new byte[in.length + ins.length];
        System.arraycopy(in, 0, out, 0, p);
        System.arraycopy(ins, 0, out, p, ins.length);
        System.arraycopy(in, p, out, p + ins.length, in.length - p);
        return out;
    }
}
