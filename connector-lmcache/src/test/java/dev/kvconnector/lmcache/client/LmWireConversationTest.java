package dev.kvconnector.lmcache.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmObjectMeta;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmWire;
import dev.kvconnector.lmcache.server.LmCacheServer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A whole conversation between {@link LmConnection} and {@link LmCacheServer}, recorded on the wire by a proxy and
 * compared byte for byte with the spec's captures of the Python server.
 */
class LmWireConversationTest {
    private static final String KEY =
            "vllm@test/model@1@0@a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77";
    private static final HexFormat HEX = HexFormat.of();

    private static String key(String k) {
        byte[] b = k.getBytes(StandardCharsets.UTF_8);
        return HEX.formatHex(b) + "20".repeat(LmWire.KEY_BYTES - b.length);
    }

    private static MemorySegment pattern(Arena arena, int n) {
        MemorySegment s = arena.allocate(n);
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 3));
        }
        return s;
    }

    private static String hex(MemorySegment s) {
        return HEX.formatHex(s.toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void v0ConversationMatchesTheCapturedBytes() throws Exception {
        try (LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V0).build().start();
             RecordingTcpProxy proxy = new RecordingTcpProxy(server.boundPort());
             Arena arena = Arena.ofConfined()) {
            MemorySegment value = pattern(arena, 1259);
            MemorySegment dst = arena.allocate(4096);
            try (LmConnection c = LmConnection.open("127.0.0.1", proxy.port(), LmProtocolVersion.V0, 2_000, 2_000,
                    1L << 20, "lm://test")) {
                assertFalse(c.exist(KEY));
                c.put(KEY, value, LmObjectMeta.bytes(1259));
                assertTrue(c.exist(KEY));
                assertEquals(1259, c.get(KEY, dst));
                assertEquals(-1, dst.asSlice(0, 1259).mismatch(value));
                assertEquals(List.of(KEY), c.list());
            }
            String listed = HEX.formatHex(KEY.getBytes(StandardCharsets.UTF_8));
            assertEquals(
                    "03000000" + "00000000" + key(KEY)
                            + "01000000" + "eb040000" + key(KEY) + hex(value)
                            + "03000000" + "00000000" + key(KEY)
                            + "02000000" + "00000000" + key(KEY)
                            + "04000000" + "00000000" + key(LmConnection.PROBE_KEY),
                    HEX.formatHex(proxy.clientBytes()));
            assertEquals(
                    "90010000" + "00000000"
                            + "c8000000" + "00000000"
                            + "c8000000" + "eb040000" + hex(value)
                            + "c8000000" + String.format("%02x000000", KEY.length()) + listed,
                    HEX.formatHex(proxy.serverBytes()));
        }
    }

    @Test
    void v1ConversationCarriesTheTensorMetadataBothWays() throws Exception {
        LmObjectMeta meta = new LmObjectMeta(LmWire.FMT_KV_2LTD, 3, 2, 2, 4, 32);
        String none = "01000000" + "02000000" + "00000000".repeat(4);
        try (LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).build().start();
             RecordingTcpProxy proxy = new RecordingTcpProxy(server.boundPort());
             Arena arena = Arena.ofConfined()) {
            MemorySegment value = pattern(arena, 1024);
            MemorySegment dst = arena.allocate(1024);
            try (LmConnection c = LmConnection.open("127.0.0.1", proxy.port(), LmProtocolVersion.V1, 2_000, 2_000,
                    1L << 20, "lm://test")) {
                assertTrue(c.health());
                assertFalse(c.exist(KEY));
                c.put(KEY, value, meta);
                assertEquals(1024, c.get(KEY, dst));
                assertEquals(meta, c.lastReply().meta());
                assertEquals(-1, dst.mismatch(value));
                assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, c::list).code());
            }
            String tensor = "01000000" + "03000000" + "02000000" + "02000000" + "04000000" + "20000000";
            assertEquals(
                    "05000000" + "00000000" + "01000000" + "02000000" + "00000000" + "00000000".repeat(4)
                            + key(LmConnection.PROBE_KEY)
                            + "03000000" + "00000000" + "01000000" + "02000000" + "00000000" + "00000000".repeat(4)
                            + key(KEY)
                            + "01000000" + "00040000" + "01000000" + "03000000" + "00000000"
                            + "02000000" + "02000000" + "04000000" + "20000000" + key(KEY) + hex(value)
                            + "02000000" + "00000000" + "01000000" + "02000000" + "00000000" + "00000000".repeat(4)
                            + key(KEY),
                    HEX.formatHex(proxy.clientBytes()));
            assertEquals(
                    "c8000000" + "00000000" + none + "00000000"
                            + "90010000" + "00000000" + none + "00000000"
                            + "c8000000" + "00040000" + tensor + "00000000" + hex(value),
                    HEX.formatHex(proxy.serverBytes()));
        }
    }
}
