package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.memory.NativeMemory;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledOnOs;
import org.junit.jupiter.api.condition.OS;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.io.TempDir;
import org.opentest4j.AssertionFailedError;

/**
 * Each of {@link LeakCheck}'s checks reports its resource while it is held and is quiet once it is released. The
 * check itself runs around these tests too, so each test releases what it takes.
 */
class LeakCheckTest {
    private static final Duration SHORT_GRACE = Duration.ofMillis(200);
    /** Threads that kvconnector's commands hand to {@code Runtime.addShutdownHook}: they run only at JVM exit. */
    private static final Set<String> SHUTDOWN_HOOKS = Set.of("kvctl-demo-cleanup", "xpyd-proxy-shutdown");
    /** A thread name written as a literal: {@code Thread.ofPlatform().name("x")} or {@code new Thread(r, "x")}. */
    private static final Pattern THREAD_NAME = Pattern.compile("(?:\\.name\\(|new Thread\\([^,()]+, *)\"([^\"]+)\"");

    @TempDir
    Path dir;

    @Test
    void aConnectorIoThreadAliveAfterTheTestIsALeakNamedByItsThreadName() throws InterruptedException {
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        CountDownLatch stop = new CountDownLatch(1);
        Thread io = Thread.ofPlatform().daemon().name("kvconnector-io-leakcheck").start(() -> await(stop));
        try {
            String leaks = LeakCheck.awaitRelease(before, SHORT_GRACE);
            assertTrue(leaks.contains("kvconnector-io-leakcheck (#" + io.threadId() + ")"), leaks);
        } finally {
            stop.countDown();
            io.join();
        }
        assertEquals("", LeakCheck.awaitRelease(before, SHORT_GRACE));
    }

    @Test
    void aVirtualLmServerThreadIsSeenThoughOnlyAThreadDumpListsIt() throws InterruptedException {
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        CountDownLatch stop = new CountDownLatch(1);
        Thread acceptor = Thread.ofVirtual().name("lmserver-accept-leakcheck").start(() -> await(stop));
        try {
            assertTrue(LeakCheck.leaks(before, LeakCheck.Snapshot.take()).contains("lmserver-accept-leakcheck"));
        } finally {
            stop.countDown();
            acceptor.join();
        }
        assertEquals("", LeakCheck.awaitRelease(before, SHORT_GRACE));
    }

    @Test
    void threadsAliveBeforeTheTestOrNotKvconnectorsAreNoLeak() throws InterruptedException {
        CountDownLatch stop = new CountDownLatch(1);
        Thread earlier = Thread.ofPlatform().daemon().name("kvc-resp-watchdog-earlier:6379").start(() -> await(stop));
        try {
            LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
            assertTrue(before.threads().stream().anyMatch(t -> t.id() == earlier.threadId()), before.toString());
            Thread foreign = Thread.ofPlatform().daemon().name("someone-elses-pool-1").start(() -> await(stop));
            try {
                assertEquals("", LeakCheck.leaks(before, LeakCheck.Snapshot.take()));
            } finally {
                stop.countDown();
                foreign.join();
            }
        } finally {
            stop.countDown();
            earlier.join();
        }
    }

    @Test
    void aThreadThatEndsWithinTheGraceIsNoLeak() throws InterruptedException {
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        Thread closing = Thread.ofPlatform().daemon().name("kvconnector-io-closing").start(() -> sleep(300));
        assertEquals("", LeakCheck.awaitRelease(before, Duration.ofSeconds(5)));
        assertFalse(closing.isAlive());
    }

    @Test
    @EnabledOnOs(OS.LINUX)
    void anOpenShmStoreIsALeakNamedByItsFilesPathUntilItCloses() throws IOException, InterruptedException {
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        KVStore shm = KVStores.open("shm:/leakcheck?capacity=1MiB&dir=" + dir);
        try {
            String leaks = LeakCheck.awaitRelease(before, SHORT_GRACE);
            assertTrue(leaks.contains("1 file(s) still mapped: " + dir.resolve("leakcheck").toRealPath()
                    + " (1 more mapping(s))"), leaks);
        } finally {
            shm.close();
        }
        assertEquals("", LeakCheck.awaitRelease(before, SHORT_GRACE));
    }

    @Test
    @EnabledOnOs(OS.LINUX)
    void aFileMappedInAnArenaLeftOpenIsALeakUntilTheArenaCloses() throws IOException, InterruptedException {
        Path file = Files.write(dir.resolve("mapped.bin"), new byte[4096]).toRealPath();
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        Arena arena = Arena.ofShared();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.map(FileChannel.MapMode.READ_WRITE, 0, 4096, arena);
            ch.map(FileChannel.MapMode.READ_ONLY, 0, 4096, arena);
            assertEquals(2, LeakCheck.mappedFiles().get(file.toString()));
            assertTrue(LeakCheck.leaks(before, LeakCheck.Snapshot.take()).contains(file
                    + " (2 more mapping(s))"));
        } finally {
            arena.close();
        }
        assertEquals("", LeakCheck.awaitRelease(before, SHORT_GRACE));
    }

    @Test
    void aStoreCounterThatGrewIsALeakNamedByTheStoreClass() {
        LeakCheck.Snapshot before = snapshot(Map.of("dev.example.NativeStore", 1L));
        assertEquals("1 dev.example.NativeStore store(s) not closed (liveStores() 1 -> 2)",
                LeakCheck.leaks(before, snapshot(Map.of("dev.example.NativeStore", 2L))));
        assertEquals("", LeakCheck.leaks(before, snapshot(Map.of("dev.example.NativeStore", 1L))));
    }

    @Test
    void theNativeMemoryCountsStillCount() throws InterruptedException {
        LeakCheck.Snapshot before = LeakCheck.Snapshot.take();
        MemorySegment block = NativeMemory.allocate(64);
        try {
            assertTrue(LeakCheck.leaks(before, LeakCheck.Snapshot.take()).startsWith("native memory: before "));
        } finally {
            NativeMemory.free(block);
        }
        assertEquals("", LeakCheck.awaitRelease(before, SHORT_GRACE));
    }

    @Test
    void theExtensionFailsTheTestThatLeakedAndNamesTestAndThreadAfterItsGrace() throws InterruptedException {
        ExtensionContext context = context("leakyTest()");
        LeakCheck check = new LeakCheck();
        check.beforeEach(context);
        CountDownLatch stop = new CountDownLatch(1);
        Thread io = Thread.ofPlatform().daemon().name("kvconnector-io-leaky").start(() -> await(stop));
        try {
            long started = System.nanoTime();
            AssertionFailedError e = assertThrows(AssertionFailedError.class, () -> check.afterEach(context));
            assertTrue(System.nanoTime() - started >= LeakCheck.GRACE.toNanos(), "failed before the grace ran out");
            assertTrue(e.getMessage().startsWith("leakyTest() leaked 1 kvconnector thread(s) still running: "
                    + "[kvconnector-io-leaky (#" + io.threadId() + ")]"), e.getMessage());
        } finally {
            stop.countDown();
            io.join();
        }
        check.beforeEach(context);
        check.afterEach(context);
    }

    @Test
    void everyThreadNameInTheMainSourcesIsWatchedOrAShutdownHook() throws IOException {
        Path root = Path.of("").toAbsolutePath().getParent();
        Set<String> names = new TreeSet<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path main : modules.map(m -> m.resolve("src/main/java")).filter(Files::isDirectory).toList()) {
                try (Stream<Path> sources = Files.walk(main)) {
                    for (Path source : sources.filter(f -> f.toString().endsWith(".java")).toList()) {
                        Matcher m = THREAD_NAME.matcher(Files.readString(source));
                        while (m.find()) {
                            names.add(m.group(1));
                        }
                    }
                }
            }
        }
        assertTrue(names.contains("kvconnector-io-"), "found no StoreConnector I/O thread in " + root + ": " + names);
        List<String> unwatched = names.stream().filter(n -> !SHUTDOWN_HOOKS.contains(n))
                .filter(n -> LeakCheck.OWNED_THREAD_PREFIXES.stream().noneMatch(n::startsWith)).toList();
        assertEquals(List.of(), unwatched, "threads started in the main sources whose names no prefix of "
                + "LeakCheck.OWNED_THREAD_PREFIXES covers: add them there");
    }

    private static LeakCheck.Snapshot snapshot(Map<String, Long> liveStores) {
        return new LeakCheck.Snapshot(new LeakCheck.Counts(0, 0, 0, 0, 0, 0), Set.of(), Map.of(), liveStores);
    }

    /** An extension context with a display name and one store: all that LeakCheck's callbacks use. */
    private static ExtensionContext context(String displayName) {
        Map<Object, Object> values = new HashMap<>();
        ExtensionContext.Store store = (ExtensionContext.Store) Proxy.newProxyInstance(
                LeakCheckTest.class.getClassLoader(), new Class<?>[] {ExtensionContext.Store.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "put" -> values.put(args[0], args[1]);
                    case "get" -> ((Class<?>) args[1]).cast(values.get(args[0]));
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        return (ExtensionContext) Proxy.newProxyInstance(LeakCheckTest.class.getClassLoader(),
                new Class<?>[] {ExtensionContext.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getStore" -> store;
                    case "getDisplayName" -> displayName;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }

    private static void await(CountDownLatch stop) {
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
