package dev.kvconnector.valkey;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.valkey.testing.RedisServerProcess;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Opening a store on a server whose {@code maxmemory-policy} is {@code noeviction} logs one warning that names the
 * server and says what will happen; other policies log nothing. The log goes through slf4j-simple to the standard
 * error stream, which the test captures.
 */
class ValkeyMemoryPolicyWarningTest {

    private static String stderrDuring(Supplier<KVStore> open) {
        PrintStream old = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            open.get().close();
        } finally {
            System.setErr(old);
        }
        return err.toString(StandardCharsets.UTF_8);
    }

    private static long countLines(String text, String needle) {
        return text.lines().filter(l -> l.contains(needle)).count();
    }

    @Test
    void noevictionWithMaxmemoryWarnsOnceThatPutsWillFailWithStoreFull() {
        try (RedisServerProcess server = RedisServerProcess.start("--maxmemory", "2mb", "--maxmemory-policy",
                "noeviction")) {
            String log = stderrDuring(() -> KVStores.open("valkey://" + server.hostPort() + "?pool=2"));
            assertEquals(1, countLines(log, "maxmemory-policy noeviction"), log);
            String line = log.lines().filter(l -> l.contains("noeviction")).findFirst().orElseThrow();
            assertTrue(line.contains("WARN") && line.contains(server.hostPort()) && line.contains("STORE_FULL")
                    && line.contains("2097152 bytes") && line.contains("allkeys-lru"), line);
        }
    }

    @Test
    void noevictionWithoutMaxmemoryWarnsThatTheServerGrowsUnbounded() {
        try (RedisServerProcess server = RedisServerProcess.start("--maxmemory", "0", "--maxmemory-policy",
                "noeviction")) {
            String log = stderrDuring(() -> KVStores.open("valkey://" + server.hostPort()));
            String line = log.lines().filter(l -> l.contains("noeviction")).findFirst().orElse(log);
            assertTrue(line.contains(server.hostPort()) && line.contains("no maxmemory is set"), line);
        }
    }

    @Test
    void evictingPolicyLogsNoWarning() {
        try (RedisServerProcess server = RedisServerProcess.start("--maxmemory", "2mb", "--maxmemory-policy",
                "allkeys-lru")) {
            String log = stderrDuring(() -> KVStores.open("valkey://" + server.hostPort()));
            assertFalse(log.contains("maxmemory-policy"), log);
        }
    }
}
