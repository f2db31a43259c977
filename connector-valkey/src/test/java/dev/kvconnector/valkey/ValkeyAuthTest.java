package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import dev.kvconnector.valkey.testing.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** AUTH with requirepass and with an ACL user, over both protocols, against a real redis-server. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValkeyAuthTest {
    private static final String PASSWORD = "s3cret-Pa55word";
    private static final String ACL_PASSWORD = "kv-user-Pa55";
    private RedisServerProcess server;

    @BeforeAll
    void start() {
        server = RedisServerProcess.startWithPassword(PASSWORD);
        assertEquals("+OK", server.command("ACL", "SETUSER", "kvuser", "on", ">" + ACL_PASSWORD, "~kv:*",
                "+@all"));
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    private void assertWorks(String uri) {
        try (KVStore s = KVStores.open(uri); Arena arena = Arena.ofConfined()) {
            MemorySegment v = Segments.random(arena, 1000, '!', 1);
            assertTrue(s.put("kv:auth", v, PutOptions.DEFAULT));
            MemorySegment dst = Segments.zeroed(arena, 1000);
            assertEquals(1000, s.getInto("kv:auth", dst));
            assertEquals(-1, Segments.mismatch(v, dst, 1000));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3", "auto"})
    void requirepassPasswordAuthenticates(String protocol) {
        assertWorks("valkey://:" + PASSWORD + "@" + server.hostPort() + "?protocol=" + protocol);
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3"})
    void aclUserAndPasswordAuthenticate(String protocol) {
        assertWorks("valkey://kvuser:" + ACL_PASSWORD + "@" + server.hostPort() + "?protocol=" + protocol);
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3"})
    void aclRulesStillApplyAfterAuthentication(String protocol) {
        try (KVStore s = KVStores.open("valkey://kvuser:" + ACL_PASSWORD + "@" + server.hostPort() + "?protocol="
                + protocol); Arena arena = Arena.ofConfined()) {
            KVException e = assertThrows(KVException.class,
                    () -> s.put("other:key", Segments.zeroed(arena, 4), PutOptions.DEFAULT));
            assertEquals(ErrorCode.AUTH_FAILED, e.code());
            assertTrue(e.getMessage().contains("NOPERM"), e.getMessage());
            assertTrue(s.put("kv:still-works", Segments.zeroed(arena, 4), PutOptions.DEFAULT));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3", "auto"})
    void wrongPasswordIsAuthFailedWithoutThePassword(String protocol) {
        String wrong = "not-the-Pa55word-xyz";
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://kvuser:" + wrong + "@" + server.hostPort() + "?protocol=" + protocol));
        assertEquals(ErrorCode.AUTH_FAILED, e.code());
        assertFalse(e.getMessage().contains(wrong), e.getMessage());
        assertFalse(String.valueOf(e.hint()).contains(wrong));
        assertTrue(e.getMessage().contains(server.hostPort()) && e.getMessage().contains("kvuser")
                && e.getMessage().contains("***"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3"})
    void missingPasswordIsAuthFailedWithAHint(String protocol) {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open("valkey://" + server.hostPort() + "?protocol=" + protocol));
        assertEquals(ErrorCode.AUTH_FAILED, e.code());
        assertTrue(e.hint().contains("requires a password"), e.hint());
    }

    /** An ACL password holding every URI delimiter, '%', '+', a space and non-ASCII characters. */
    private static final String HARD_PASSWORD = "p/a?s#s@w:o%r+d \u00e9\u5bc6";

    @ParameterizedTest
    @ValueSource(strings = {"2", "3"})
    void aPasswordWithEveryDelimiterAuthenticatesWhenPercentEncoded(String protocol) {
        assertEquals("+OK", server.command("ACL", "SETUSER", "hard", "on", ">" + HARD_PASSWORD, "~kv:*", "+@all"));
        assertWorks("valkey://hard:" + StoreUri.encode(HARD_PASSWORD) + "@" + server.hostPort() + "?protocol="
                + protocol);
    }

    @ParameterizedTest
    @ValueSource(strings = {"2", "3"})
    void rawPlusAtColonAndNonAsciiInThePasswordReachTheServerUnchanged(String protocol) {
        String raw = "a+b@c:d \u00e9";
        assertEquals("+OK", server.command("ACL", "SETUSER", "rawuser", "on", ">" + raw, "~kv:*", "+@all"));
        assertWorks("valkey://rawuser:" + raw + "@" + server.hostPort() + "?protocol=" + protocol);
    }

    @ParameterizedTest
    @ValueSource(strings = {"valkey://:S3/CR3T@%s", "valkey://:S3?CR3T@%s", "valkey://:S3%%zzCR3T@%s",
            "valkey://kvuser:S3CR3T@%s:1x"})
    void malformedPasswordsFailBeforeConnectingAndAreNeverShown(String form) {
        KVException e = assertThrows(KVException.class, () -> KVStores.open(form.formatted(server.hostPort())));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertFalse(e.getMessage().contains("S3") || e.getMessage().contains("CR3T"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"valkey", "valkeys", "rediss"})
    void aUserWithoutAPasswordIsAnErrorNotAnUnauthenticatedConnection(String scheme) {
        KVException e = assertThrows(KVException.class,
                () -> KVStores.open(scheme + "://t0ken@" + server.hostPort()));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertFalse(e.getMessage().contains("t0ken"), e.getMessage());
        assertTrue(e.hint().contains("user:password@"), e.hint());
    }
}
