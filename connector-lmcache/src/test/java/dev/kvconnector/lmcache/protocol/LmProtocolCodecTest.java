package dev.kvconnector.lmcache.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.AlphaChars;
import net.jqwik.api.constraints.NumericChars;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

class LmProtocolCodecTest {
    /** The spec's key for the first chunk of {@code [0,1,2,3]} of test/model. */
    static final String KEY = "vllm@test/model@1@0@a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77";
    private static final HexFormat HEX = HexFormat.of();

    static String paddedKeyHex(String key) {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        return HEX.formatHex(k) + "20".repeat(LmWire.KEY_BYTES - k.length);
    }

    private static String hex(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return HEX.formatHex(out);
    }

    @Test
    void headerSizesAreThoseOfTheSpec() {
        assertEquals(158, LmProtocolVersion.V0.requestHeaderBytes());
        assertEquals(8, LmProtocolVersion.V0.replyHeaderBytes());
        assertEquals(186, LmProtocolVersion.V1.requestHeaderBytes());
        assertEquals(36, LmProtocolVersion.V1.replyHeaderBytes());
    }

    @Test
    void v0ExistRequestMatchesTheCapturedBytes() {
        ByteBuffer b = ByteBuffer.allocateDirect(158);
        new LmRequestHeader().set(LmWire.EXIST, KEY).encode(LmProtocolVersion.V0, b);
        assertEquals("03000000" + "00000000" + paddedKeyHex(KEY), hex(b));
    }

    @Test
    void v0PutRequestOf1259BytesMatchesTheCapturedBytes() {
        ByteBuffer b = ByteBuffer.allocateDirect(158);
        new LmRequestHeader().set(LmWire.PUT, KEY, 1259, LmObjectMeta.bytes(1259), LmWire.LOCATION_NONE)
                .encode(LmProtocolVersion.V0, b);
        assertEquals("01000000" + "eb040000" + paddedKeyHex(KEY), hex(b));
    }

    @Test
    void v0RepliesDecodeTheCapturedBytes() {
        LmReplyHeader miss = new LmReplyHeader().decode(LmProtocolVersion.V0,
                ByteBuffer.wrap(HEX.parseHex("9001000000000000")));
        assertEquals(LmWire.FAIL, miss.code());
        assertEquals(0, miss.length());
        LmReplyHeader hit = new LmReplyHeader().decode(LmProtocolVersion.V0,
                ByteBuffer.wrap(HEX.parseHex("c8000000eb040000")));
        assertEquals(LmWire.SUCCESS, hit.code());
        assertEquals(1259, hit.length());
    }

    @Test
    void v0ReplyEncodesCodeThenLength() {
        ByteBuffer b = ByteBuffer.allocateDirect(8);
        new LmReplyHeader().set(LmWire.SUCCESS, 1259).encode(LmProtocolVersion.V0, b);
        assertEquals("c8000000eb040000", hex(b));
    }

    @Test
    void v1RequestPutsLocationBeforeTheShapeAndTheKeyLast() {
        ByteBuffer b = ByteBuffer.allocateDirect(186);
        new LmRequestHeader().set(LmWire.PUT, KEY, 0x01020304, new LmObjectMeta(1, 3, 2, 32, 256, 1024),
                LmWire.LOCATION_LOCAL_CPU).encode(LmProtocolVersion.V1, b);
        assertEquals("01000000" + "04030201" + "01000000" + "03000000" + "01000000"
                + "02000000" + "20000000" + "00010000" + "00040000" + paddedKeyHex(KEY), hex(b));
    }

    @Test
    void v1ReplyPutsLocationLast() {
        ByteBuffer b = ByteBuffer.allocateDirect(36);
        new LmReplyHeader().set(LmWire.SUCCESS, 1259, new LmObjectMeta(6, 8, 1, 2, 3, 4), LmWire.LOCATION_LOCAL_DISK)
                .encode(LmProtocolVersion.V1, b);
        assertEquals("c8000000" + "eb040000" + "06000000" + "08000000"
                + "01000000" + "02000000" + "03000000" + "04000000" + "02000000", hex(b));
    }

    @Test
    void v1MissReplyCarriesFmt1Dtype2AndZeroShape() {
        ByteBuffer b = ByteBuffer.allocateDirect(36);
        new LmReplyHeader().set(LmWire.FAIL, 0).encode(LmProtocolVersion.V1, b);
        assertEquals("90010000" + "00000000" + "01000000" + "02000000" + "00000000".repeat(5), hex(b));
    }

    @Test
    void decodingStripsThePaddingOfTheKey() {
        ByteBuffer b = ByteBuffer.allocateDirect(186);
        new LmRequestHeader().set(LmWire.GET, "k").encode(LmProtocolVersion.V1, b);
        LmRequestHeader h = new LmRequestHeader().decode(LmProtocolVersion.V1, b);
        assertEquals("k", h.key());
        assertEquals(LmWire.GET, h.command());
        assertEquals(LmObjectMeta.NONE, h.meta());
    }

    @Test
    void aKeyOf150BytesFitsExactly() {
        String key = "k".repeat(150);
        ByteBuffer b = ByteBuffer.allocateDirect(158);
        new LmRequestHeader().set(LmWire.GET, key).encode(LmProtocolVersion.V0, b);
        assertEquals(key, new LmRequestHeader().decode(LmProtocolVersion.V0, b).key());
    }

    @Test
    void aKeyOf151BytesIsRefusedNeverCut() {
        KVException e = assertThrows(KVException.class,
                () -> LmKeyField.encode("k".repeat(151), ByteBuffer.allocate(150), 0));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("151 UTF-8 bytes"), e.getMessage());
        assertTrue(e.getMessage().contains("150-byte"), e.getMessage());
    }

    @Test
    void nonAsciiKeysAreCountedInUtf8Bytes() {
        String fits = "é".repeat(75);
        assertEquals(150, LmKeyField.checkedUtf8Length(fits));
        ByteBuffer b = ByteBuffer.allocate(158);
        new LmRequestHeader().set(LmWire.GET, fits).encode(LmProtocolVersion.V0, b);
        assertEquals(fits, new LmRequestHeader().decode(LmProtocolVersion.V0, b).key());

        KVException e = assertThrows(KVException.class, () -> LmKeyField.checkedUtf8Length("é".repeat(76)));
        assertTrue(e.getMessage().contains("152 UTF-8 bytes (76 chars)"), e.getMessage());
        assertEquals(4 * 37 + 2, LmKeyField.checkedUtf8Length("😀".repeat(37) + "ab"));
    }

    @Test
    void keysTheServerWouldAlterAreRefused() {
        for (String bad : new String[] {"", " lead", "trail ", "tab\t", "\u00a0nbsp", "pair\ud800"}) {
            KVException e = assertThrows(KVException.class, () -> LmKeyField.checkedUtf8Length(bad), bad);
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        }
    }

    @Test
    void aKeyFieldThatIsNotUtf8IsAProtocolError() {
        ByteBuffer b = ByteBuffer.allocate(158);
        for (int i = 8; i < 158; i++) {
            b.put(i, (byte) 0xff);
        }
        KVException e = assertThrows(KVException.class,
                () -> new LmRequestHeader().decode(LmProtocolVersion.V0, b));
        assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
    }

    @Test
    void protocolVersionsParseFromTheirLabels() {
        assertEquals(LmProtocolVersion.V0, LmProtocolVersion.parse("v0"));
        assertEquals(LmProtocolVersion.V1, LmProtocolVersion.parse("V1"));
        assertEquals(ErrorCode.INVALID_ARGUMENT,
                assertThrows(KVException.class, () -> LmProtocolVersion.parse("v2")).code());
    }

    @Property(tries = 300)
    void v1RequestsRoundTrip(@ForAll int command, @ForAll int length, @ForAll int fmt, @ForAll int dtype,
                             @ForAll int location, @ForAll int s0, @ForAll int s1, @ForAll int s2, @ForAll int s3,
                             @ForAll @AlphaChars @NumericChars @StringLength(min = 1, max = 150) String key) {
        LmObjectMeta meta = new LmObjectMeta(fmt, dtype, s0, s1, s2, s3);
        ByteBuffer b = ByteBuffer.allocateDirect(186);
        new LmRequestHeader().set(command, key, length, meta, location).encode(LmProtocolVersion.V1, b);
        assertEquals(186, b.remaining());
        LmRequestHeader d = new LmRequestHeader().decode(LmProtocolVersion.V1, b);
        assertEquals(command, d.command());
        assertEquals(length, d.length());
        assertEquals(meta, d.meta());
        assertEquals(location, d.location());
        assertEquals(key, d.key());
    }

    @Property(tries = 300)
    void v1RepliesRoundTrip(@ForAll int code, @ForAll int length, @ForAll int fmt, @ForAll int dtype,
                            @ForAll int s0, @ForAll int s1, @ForAll int s2, @ForAll int s3, @ForAll int location) {
        LmObjectMeta meta = new LmObjectMeta(fmt, dtype, s0, s1, s2, s3);
        ByteBuffer b = ByteBuffer.allocateDirect(36);
        new LmReplyHeader().set(code, length, meta, location).encode(LmProtocolVersion.V1, b);
        LmReplyHeader d = new LmReplyHeader().decode(LmProtocolVersion.V1, b);
        assertEquals(code, d.code());
        assertEquals(length, d.length());
        assertEquals(meta, d.meta());
        assertEquals(location, d.location());
    }
}
