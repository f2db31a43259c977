package dev.kvconnector.mooncake;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The probe of the master and the setup deadline, against the test double imitating upstream's retries of a master
 * it cannot reach ({@code MOONCAKE_DOUBLE_MASTER_RETRY_MS}, set in this process's environment for each test).
 */
class MooncakeSetupTest {
    /** Per try of the double's 20 retries: 20 x 1 s, far beyond every deadline below. */
    private static final String RETRY_MS = "1000";
    private static final MethodHandle SETENV = libc("setenv", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS,
            JAVA_INT));
    private static final MethodHandle UNSETENV = libc("unsetenv", FunctionDescriptor.of(JAVA_INT, ADDRESS));

    private MooncakeTestTarget target;

    private static MethodHandle libc(String name, FunctionDescriptor fd) {
        Linker linker = Linker.nativeLinker();
        return linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), fd);
    }

    @BeforeEach
    void imitateUpstreamRetries() throws Throwable {
        target = MooncakeTestTarget.require();
        assumeTrue(target.isDouble(), "imitates an unreachable master with the test double only");
        try (Arena a = Arena.ofConfined()) {
            assertEquals(0, (int) SETENV.invokeExact(a.allocateFrom("MOONCAKE_DOUBLE_MASTER_RETRY_MS"),
                    a.allocateFrom(RETRY_MS), 1));
        }
    }

    @AfterEach
    void stopImitating() throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            assertEquals(0, (int) UNSETENV.invokeExact(a.allocateFrom("MOONCAKE_DOUBLE_MASTER_RETRY_MS")));
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private MooncakeStore open(String master, String extra) {
        String uri = target.uri(master, "&probe-timeout=3s" + extra);
        return MooncakeStore.open(StoreUri.parse(uri), Map.of());
    }

    private static long millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    @Test
    void anUnreachableMasterFailsAtOnceNamingItsAddress() throws IOException {
        String master = "127.0.0.1:" + freePort();
        long t0 = System.nanoTime();
        KVException e = assertThrows(KVException.class, () -> open(master, ""));
        long took = millisSince(t0);
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("Mooncake master at " + master + " within 3000 ms"), e.getMessage());
        assertTrue(e.hint().contains("probe-timeout"), e.hint());
        assertTrue(took < 2_000, "failed after " + took + " ms; the double's retries take 20 s");
    }

    @Test
    void anUnreachableHttpMetadataServerFailsNamingItsAddress() throws IOException {
        try (ServerSocket master = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            String metadata = "127.0.0.1:" + freePort();
            KVException e = assertThrows(KVException.class, () -> open("127.0.0.1:" + master.getLocalPort(),
                    "&metadata=http://" + metadata + "/metadata"));
            assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("metadata server at " + metadata), e.getMessage());
            assertTrue(e.hint().contains("--enable_http_metadata_server"), e.hint());
        }
    }

    @Test
    void aReachableMasterPassesTheProbeAndTheSetup() throws IOException {
        try (ServerSocket master = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
             MooncakeStore store = open("127.0.0.1:" + master.getLocalPort(), "&probe-timeout=500ms")) {
            assertTrue(store.uri().contains(String.valueOf(master.getLocalPort())));
        }
    }

    @Test
    void aSetupThatOutlivesItsDeadlineFailsWithTimeoutAtTheDeadline() throws IOException, InterruptedException {
        int port = freePort();
        String master = "127.0.0.1:" + port;
        long t0 = System.nanoTime();
        KVException e = assertThrows(KVException.class,
                () -> open(master, "&probe-timeout=0&setup-timeout=800ms"));
        long took = millisSince(t0);
        assertEquals(ErrorCode.TIMEOUT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("setup-timeout=800 ms") && e.getMessage().contains("master " + master),
                e.getMessage());
        assertTrue(e.hint().contains("local_hostname=HOST:PORT"), e.hint());
        assertTrue(took >= 800 && took < 3_000, "failed after " + took + " ms; the double's retries take 20 s");
        // The abandoned setup retries until the master answers; then it returns and its thread destroys the client.
        try (ServerSocket reachable = new ServerSocket(port, 50, InetAddress.getLoopbackAddress())) {
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (setupThreadAlive()) {
                assertTrue(System.nanoTime() < deadline, "the abandoned setup did not return within 5 s of the master "
                        + master + " answering");
                Thread.sleep(20);
            }
        }
    }

    private static boolean setupThreadAlive() {
        return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals("mooncake-setup"));
    }

    @Test
    void aLocalHostnameWithAPortSkipsTheRetries() throws IOException {
        String master = "127.0.0.1:" + freePort();
        long t0 = System.nanoTime();
        KVException e = assertThrows(KVException.class,
                () -> open(master, "&probe-timeout=0&local_hostname=127.0.0.1:" + freePort()));
        long took = millisSince(t0);
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("-900") || e.getMessage().contains("RPC"), e.getMessage());
        assertTrue(took < 2_000, "failed after " + took + " ms");
    }

    @Test
    void badDeadlinesAreRefused() {
        assertEquals(ErrorCode.INVALID_CONFIG, assertThrows(KVException.class,
                () -> open("127.0.0.1:1", "&setup-timeout=0")).code());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> open("127.0.0.1:1", "&probe-timeout=soon")).code());
    }
}
