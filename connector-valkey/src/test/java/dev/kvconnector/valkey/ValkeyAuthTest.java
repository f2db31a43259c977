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
        server.close();
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
}
