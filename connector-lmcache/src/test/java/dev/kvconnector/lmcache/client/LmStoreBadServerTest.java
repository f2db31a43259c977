package dev.kvconnector.lmcache.client;

import static dev.kvconnector.lmcache.client.RawSocketLmServerTestDouble.ints;
import static dev.kvconnector.lmcache.client.RawSocketLmServerTestDouble.readHeader;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

/** The lm:// client against servers that break the protocol, die mid-reply or never answer. */
class LmStoreBadServerTest {
    private static final int V0_REQUEST = LmProtocolVersion.V0.requestHeaderBytes();

    private static KVException failure(RawSocketLmServerTestDouble server, String options,
                                       java.util.function.Consumer<KVStore> call) {
        try (KVStore store = KVStores.open("lm://127.0.0.1:" + server.port() + "?protocol=v0&timeout=2s"
                + options)) {
            return assertThrows(KVException.class, () -> call.accept(store));
        }
    }

    private static void get(KVStore store) {
        try (Arena arena = Arena.ofConfined()) {
            store.getInto("k", arena.allocate(4096));
        }
    }

    @Test
    void truncatedReplyHeaderIsUnreachableWithTheByteCount() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(200), 0, 4);
        })) {
            KVException e = failure(server, "", s -> s.exists("k"));
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("after 4 of 8 bytes of the reply header"), e.getMessage());
            assertTrue(e.getMessage().contains("127.0.0.1:" + server.port()), e.getMessage());
        }
    }

    @Test
    void serverClosingMidPayloadIsUnreachableWithTheByteCount() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(200, 1000));
            out.write(new byte[10]);
        })) {
            KVException e = failure(server, "", LmStoreBadServerTest::get);
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("after 10 of 1000 bytes of the value of GET"), e.getMessage());
        }
    }

    @Test
    void negativeReplyLengthIsAProtocolError() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(200, -5));
        })) {
            KVException e = failure(server, "", LmStoreBadServerTest::get);
            assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
            assertTrue(e.getMessage().contains("-5 bytes"), e.getMessage());
        }
    }

    @Test
    void replyLengthAboveMaxReplyIsAProtocolError() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(200, 5000));
        })) {
            KVException e = failure(server, "&max-reply=4096", LmStoreBadServerTest::get);
            assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
            assertTrue(e.getMessage().contains("5000 bytes") && e.getMessage().contains("max-reply"),
                    e.getMessage());
        }
    }

    @Test
    void unknownReplyCodeIsAProtocolError() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(201, 0));
        })) {
            KVException e = failure(server, "", s -> s.exists("k"));
            assertEquals(ErrorCode.PROTOCOL_ERROR, e.code());
            assertTrue(e.getMessage().contains("unknown code 201"), e.getMessage());
        }
    }

    @Test
    void existReplyAnnouncingAPayloadIsAProtocolError() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(200, 7));
        })) {
            assertEquals(ErrorCode.PROTOCOL_ERROR, failure(server, "", s -> s.exists("k")).code());
        }
    }

    @Test
    void silentServerTimesOutWithinTheTimeout() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble(
                (in, out) -> in.transferTo(java.io.OutputStream.nullOutputStream()));
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.port() + "?protocol=v0&timeout=200ms")) {
            long t0 = System.nanoTime();
            KVException e = assertThrows(KVException.class, () -> store.exists("k"));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(ErrorCode.TIMEOUT, e.code());
            assertTrue(e.getMessage().contains("200 ms"), e.getMessage());
            assertTrue(ms >= 150 && ms < 4_000, "took " + ms + " ms");
        }
    }

    @Test
    void aBrokenConnectionIsDiscardedAndTheNextCallConnectsAgain() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(201, 0));
            readHeader(in, V0_REQUEST);
            out.write(ints(400, 0));
        });
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.port() + "?protocol=v0")) {
            assertEquals(ErrorCode.PROTOCOL_ERROR, assertThrows(KVException.class, () -> store.exists("k")).code());
            assertEquals(ErrorCode.PROTOCOL_ERROR, assertThrows(KVException.class, () -> store.exists("k")).code());
            assertEquals(2, server.connections());
        }
    }

    @Test
    void v0ClientAgainstAV1ServerTimesOutNamingTheProtocol() {
        try (LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).build().start();
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.boundPort() + "?protocol=v0&timeout=300ms")) {
            KVException e = assertThrows(KVException.class, () -> store.exists("k"));
            assertEquals(ErrorCode.TIMEOUT, e.code());
            assertTrue(e.hint().contains("protocol=v0"), e.getMessage());
        }
    }

    @Test
    void nothingListeningIsUnreachableNamingHostAndPort() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        try (KVStore store = KVStores.open("lm://127.0.0.1:" + port)) {
            KVException e = assertThrows(KVException.class, () -> store.exists("k"));
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
            assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());
            assertTrue(e.hint().contains("kvctl lmserver"), e.hint());
        }
    }

    @Test
    void failReplyToGetIsAMissNotAnError() throws Exception {
        try (RawSocketLmServerTestDouble server = new RawSocketLmServerTestDouble((in, out) -> {
            readHeader(in, V0_REQUEST);
            out.write(ints(400, 0));
        });
             KVStore store = KVStores.open("lm://127.0.0.1:" + server.port() + "?protocol=v0");
             Arena arena = Arena.ofConfined()) {
            MemorySegment dst = arena.allocate(16);
            assertEquals(-1, store.getInto("k", dst));
        }
    }
}
