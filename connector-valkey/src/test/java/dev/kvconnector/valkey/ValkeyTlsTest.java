package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import dev.kvconnector.valkey.testing.TestCertificates;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code valkeys://} and {@code rediss://} against a real redis-server with a TLS port and a throwaway CA. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValkeyTlsTest {
    private TestCertificates certs;
    private RedisServerProcess server;
    private RedisServerProcess mutual;
    private int tlsPort;
    private int mutualPort;

    @BeforeAll
    void start() throws IOException {
        RedisServerProcess.findBinary();
        certs = TestCertificates.generate();
        tlsPort = RedisServerProcess.freePort();
        server = RedisServerProcess.start(certs.serverArgs(tlsPort, false).toArray(String[]::new));
        mutualPort = RedisServerProcess.freePort();
        mutual = RedisServerProcess.start(certs.serverArgs(mutualPort, true).toArray(String[]::new));
    }

    @AfterAll
    void stop() {
        try {
            if (server != null) {
                server.close();
            }
            if (mutual != null) {
                mutual.close();
            }
        } finally {
            if (certs != null) {
                certs.delete();
            }
        }
    }

    private String tlsUri(String scheme, int port, String extra) {
        return scheme + "://127.0.0.1:" + port + "?tls-ca=" + certs.caPem() + extra;
    }

    @ParameterizedTest
    @ValueSource(strings = {"valkeys", "rediss"})
    void valuesOfEverySizeAndTypeByteRoundTripOverTls(String scheme) {
        try (KVStore store = KVStores.open(tlsUri(scheme, tlsPort, "&protocol=3")); Arena arena = Arena.ofConfined()) {
            long[] sizes = {0, 1, 16 * 1024 + 1, 100_000, 16L << 20};
            String types = "+-:$*%_,#!=(|~>";
            for (int i = 0; i < sizes.length; i++) {
                MemorySegment v = Segments.random(arena, sizes[i], types.charAt(i * 3 % types.length()), i);
                assertTrue(store.put("tls:" + i, v, PutOptions.DEFAULT));
                MemorySegment dst = Segments.zeroed(arena, sizes[i]);
                assertEquals(sizes[i], store.getInto("tls:" + i, dst));
                assertEquals(-1, Segments.mismatch(v, dst, sizes[i]), sizes[i] + " bytes");
            }
            long r = store.getInto("tls:4", Segments.zeroed(arena, 10));
            assertEquals(16L << 20, GetResult.requiredSize(r), "too-small over TLS discards the payload");
            String[] keys = {"tls:1", "tls:2", "tls:3"};
            MemorySegment[] dsts = {Segments.zeroed(arena, 1), Segments.zeroed(arena, 16 * 1024 + 1),
                    Segments.zeroed(arena, 100_000)};
            long[] results = new long[3];
            store.getIntoBatch(keys, dsts, 3, results);
            assertEquals(100_000, results[2]);
            assertTrue(store.healthCheck().contains("answered PING"));
        }
    }

    @Test
    void clientCertificateFromAKeystoreSatisfiesTlsAuthClients() {
        String uri = tlsUri("valkeys", mutualPort, "&keystore=" + certs.clientP12() + "&keystore-password="
                + TestCertificates.P12_PASSWORD);
        try (KVStore store = KVStores.open(uri); Arena arena = Arena.ofConfined()) {
            assertTrue(store.put("mtls", Segments.random(arena, 10, 1, 1), PutOptions.DEFAULT));
            assertEquals(10, store.size("mtls"));
            assertFalse(store.uri().contains(TestCertificates.P12_PASSWORD), store.uri());
        }
    }

    @Test
    void missingClientCertificateFailsTheConnection() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open(tlsUri("valkeys", mutualPort, "&timeout=3s")));
        assertTrue(e.getMessage().contains("127.0.0.1:" + mutualPort), e.getMessage());
    }

    @Test
    void untrustedServerCertificateIsAConfigErrorWithAHint() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkeys://127.0.0.1:" + tlsPort + "?tls-ca=" + certs.otherCaPem()));
        assertEquals(ErrorCode.INVALID_CONFIG, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("TLS handshake with 127.0.0.1:" + tlsPort), e.getMessage());
        assertTrue(e.hint().contains("tls-ca"), e.hint());
    }

    @Test
    void tlsClientOnAPlainPortTimesOutNamingTheTlsHandshake() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open(tlsUri("valkeys", server.port(), "&timeout=1s")));
        assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("TLS handshake") && e.hint().contains("tls-port"), e.getMessage());
    }

    @Test
    void tlsOptionsOnAPlainSchemeAreUnknownOptions() {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://127.0.0.1:" + server.port() + "?tls-ca=/x.pem"));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("tls-ca"), e.getMessage());
    }
}
