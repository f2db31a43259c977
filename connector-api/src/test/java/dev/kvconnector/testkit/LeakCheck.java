package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.management.HotSpotDiagnosticMXBean;
import dev.kvconnector.cuda.CudaStaging;
import dev.kvconnector.memory.NativeMemory;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.paged.PagedKVCache;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fails a test that leaves behind what kvconnector allocates or starts:
 * <ul>
 *   <li>native memory: malloc'd store values, staging pools or leases, CUDA device staging leases, paged caches;
 *   <li>kvconnector's background threads, platform or virtual, that were not alive before the test (names in
 *       {@link #OWNED_THREAD_PREFIXES}): a connector, a Valkey pool, an LMCache server or a health checker left
 *       open;
 *   <li>memory-mapped files (from {@code /proc/self/maps}, on Linux) that were not mapped before the test: an
 *       {@code shm:} store left open keeps its file mapped in its shared arena, and so does any file mapping
 *       whose arena was not closed. Shared libraries, jars and the JDK's own files are not counted: loading a
 *       library maps it for the life of the process;
 *   <li>stores whose arenas only a counter of their own sees ({@link #STORE_COUNTERS}, read when that module is on
 *       the class path): a {@code memory:} store holds a shared arena even when empty, a {@code mooncake://}
 *       store its native client and staging in two.
 * </ul>
 * Registered for every test through JUnit's extension auto-detection (the parent pom turns it on), so every module
 * that has this test-jar on its class path gets it.
 *
 * <p>Background threads may still be releasing when a test returns, so the check waits up to {@link #GRACE} for
 * everything to come back before it fails; the failure names what leaked: the counts, the thread names, the mapped
 * paths.
 */
public final class LeakCheck implements BeforeEachCallback, AfterEachCallback {
    /** How long the check waits for background releases before it fails. */
    static final Duration GRACE = Duration.ofSeconds(5);

    /** Name prefixes of the threads kvconnector starts; each is followed by where it starts them. */
    static final List<String> OWNED_THREAD_PREFIXES = List.of(
            "kvconnector-io-",     // connector-api StoreConnector: the I/O pool
            "kvconnector-kv-",     // connector-api ZmqKvEventPublisher; proxy's KV event feeds
            "kvconnector-events-", // store event subscriptions: shm: (ShmSubscription), valkey:// (notifications)
            "reaper-",             // jeromq ZContext (a KV event publisher or subscriber left open)
            "iothread-",           // jeromq ZContext
            "kvc-resp-watchdog-",  // connector-valkey ConnectionPool
            "kvc-tiered-write-back-", // connector-api TieredStore: the write-back
            "mooncake-setup",      // connector-mooncake MooncakeSetup
            "lmserver-",           // connector-lmcache LmCacheServer: accept, conn and watchdog (virtual)
            "xpyd-health",         // proxy HealthChecker (virtual)
            "stall-meter",         // benchmarks StallMeter
            "loopback-peer-",      // benchmarks LoopbackPeer
            "peer-stdin-watch",    // benchmarks ShmPeerProcess
            "open-loop-client-",   // benchmarks OpenLoopClients
            "metrics-scraper",     // benchmarks MetricsScraper
            "two-core-copier");    // benchmarks ShmCrossProcessBenchmark

    /**
     * Classes with a static {@code long liveStores()} that counts their instances whose arenas are open, for stores
     * whose arenas leave no trace that a process-wide look can find.
     */
    static final List<String> STORE_COUNTERS = List.of("dev.kvconnector.store.memory.MemoryStore",
            "dev.kvconnector.mooncake.MooncakeStore");

    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(LeakCheck.class);
    private static final Path MAPS = Path.of("/proc/self/maps");
    private static final Pattern NOT_COUNTED_MAPPING = Pattern.compile(
            "\\.so(\\.\\d+)*( \\(deleted\\))?$|\\.jar$|\\.jsa$|/hsperfdata_[^/]*/\\d+$");
    private static final String JAVA_HOME = Path.of(System.getProperty("java.home")).toAbsolutePath() + "/";
    private static final Map<String, MethodHandle> LIVE_STORES = resolveStoreCounters();
    private static final ObjectMapper JSON = new ObjectMapper();

    /** What the native memory counters of connector-api say. */
    record Counts(long mallocBlocks, long mallocBytes, long pools, long leases, long pagedCaches,
                  long deviceLeases) {
        static Counts now() {
            return new Counts(NativeMemory.liveBlocks(), NativeMemory.liveBytes(), SegmentPool.livePools(),
                    SegmentPool.liveLeases(), PagedKVCache.liveAllocated(), CudaStaging.liveDeviceLeases());
        }
    }

    /** One live thread: its id and name. */
    record OwnedThread(long id, String name) implements Comparable<OwnedThread> {
        @Override
        public int compareTo(OwnedThread o) {
            return Long.compare(id, o.id);
        }

        @Override
        public String toString() {
            return name + " (#" + id + ")";
        }
    }

    /**
     * What kvconnector holds at one moment.
     *
     * @param counts the native memory counters
     * @param threads kvconnector's live threads, platform and virtual
     * @param mappedFiles each mapped file (not a library) to its number of mappings in {@code /proc/self/maps}
     * @param liveStores each class of {@link #STORE_COUNTERS} on the class path to its {@code liveStores()}
     */
    record Snapshot(Counts counts, Set<OwnedThread> threads, Map<String, Integer> mappedFiles,
                    Map<String, Long> liveStores) {
        static Snapshot take() {
            return new Snapshot(Counts.now(), ownedThreads(), LeakCheck.mappedFiles(), readLiveStores());
        }
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getStore(NS).put("before", Snapshot.take());
    }

    @Override
    public void afterEach(ExtensionContext context) throws InterruptedException {
        String leaks = awaitRelease(context.getStore(NS).get("before", Snapshot.class), GRACE);
        if (!leaks.isEmpty()) {
            fail(context.getDisplayName() + " leaked " + leaks);
        }
    }

    /**
     * Waits up to {@code grace} until nothing is held that was not held at {@code before}.
     *
     * @return what is still leaked at the end of the wait, as {@link #leaks} words it; empty when nothing is
     */
    static String awaitRelease(Snapshot before, Duration grace) throws InterruptedException {
        long deadline = System.nanoTime() + grace.toNanos();
        String leaks = leaks(before, Snapshot.take());
        while (!leaks.isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(20);
            leaks = leaks(before, Snapshot.take());
        }
        return leaks;
    }

    /**
     * Says what {@code after} holds that {@code before} did not: a changed native count, a thread that was not alive,
     * a file mapped more times, a store counter that grew.
     *
     * @return one clause per kind of leak, joined with "; ", or empty when nothing leaked
     */
    static String leaks(Snapshot before, Snapshot after) {
        List<String> found = new ArrayList<>();
        if (!after.counts().equals(before.counts())) {
            found.add("native memory: before " + before.counts() + ", after " + after.counts());
        }
        Set<OwnedThread> started = new TreeSet<>(after.threads());
        started.removeAll(before.threads());
        if (!started.isEmpty()) {
            found.add(started.size() + " kvconnector thread(s) still running: " + started);
        }
        Map<String, Integer> mapped = new TreeMap<>();
        after.mappedFiles().forEach((path, n) -> {
            int more = n - before.mappedFiles().getOrDefault(path, 0);
            if (more > 0) {
                mapped.put(path, more);
            }
        });
        if (!mapped.isEmpty()) {
            found.add(mapped.size() + " file(s) still mapped: " + mapped.entrySet().stream()
                    .map(e -> e.getKey() + " (" + e.getValue() + " more mapping(s))")
                    .collect(Collectors.joining(", ")));
        }
        after.liveStores().forEach((store, n) -> {
            long was = before.liveStores().getOrDefault(store, 0L);
            if (n > was) {
                found.add((n - was) + " " + store + " store(s) not closed (liveStores() " + was + " -> " + n + ")");
            }
        });
        return String.join("; ", found);
    }

    /** kvconnector's live threads, from a thread dump, since only a dump lists virtual threads. */
    static Set<OwnedThread> ownedThreads() {
        Path dump = null;
        try {
            dump = Files.createTempFile("kvc-leakcheck-threads-", ".json");
            Files.delete(dump); // dumpThreads refuses to overwrite
            ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class)
                    .dumpThreads(dump.toString(), HotSpotDiagnosticMXBean.ThreadDumpFormat.JSON);
            Set<OwnedThread> owned = new TreeSet<>();
            for (JsonNode container : JSON.readTree(dump.toFile()).path("threadDump").path("threadContainers")) {
                for (JsonNode t : container.path("threads")) {
                    String name = t.path("name").asText("");
                    if (OWNED_THREAD_PREFIXES.stream().anyMatch(name::startsWith)) {
                        owned.add(new OwnedThread(Long.parseLong(t.path("tid").asText()), name));
                    }
                }
            }
            return owned;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot dump this JVM's threads to " + dump + ": " + e, e);
        } finally {
            if (dump != null) {
                try {
                    Files.deleteIfExists(dump);
                } catch (IOException e) {
                    System.err.println("LeakCheck: cannot delete " + dump + ": " + e);
                }
            }
        }
    }

    /**
     * The files this process maps, other than libraries, jars and the JDK's files, each with its number of
     * mappings; empty where {@code /proc/self/maps} does not exist.
     */
    static Map<String, Integer> mappedFiles() {
        List<String> lines;
        try {
            lines = Files.readAllLines(MAPS);
        } catch (NoSuchFileException e) {
            return Map.of();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + MAPS + ": " + e, e);
        }
        Map<String, Integer> files = new LinkedHashMap<>();
        for (String line : lines) {
            // address perms offset dev inode path; the path may hold spaces, and ends in " (deleted)" once unlinked
            String[] f = line.split("\\s+", 6);
            if (f.length < 6 || f[4].equals("0") || !f[5].startsWith("/")) {
                continue;
            }
            String path = f[5];
            if (!path.startsWith(JAVA_HOME) && !NOT_COUNTED_MAPPING.matcher(path).find()) {
                files.merge(path, 1, Integer::sum);
            }
        }
        return files;
    }

    private static Map<String, Long> readLiveStores() {
        Map<String, Long> live = new TreeMap<>();
        LIVE_STORES.forEach((store, counter) -> {
            try {
                live.put(store, (long) counter.invokeExact());
            } catch (Throwable t) {
                throw new IllegalStateException("cannot read " + store + ".liveStores(): " + t, t);
            }
        });
        return live;
    }

    private static Map<String, MethodHandle> resolveStoreCounters() {
        Map<String, MethodHandle> counters = new TreeMap<>();
        for (String name : STORE_COUNTERS) {
            Class<?> store;
            try {
                store = Class.forName(name, false, LeakCheck.class.getClassLoader());
            } catch (ClassNotFoundException absent) {
                continue; // that module is not on this test class path
            }
            try {
                counters.put(name, MethodHandles.publicLookup().findStatic(store, "liveStores",
                        MethodType.methodType(long.class)));
            } catch (NoSuchMethodException | IllegalAccessException e) {
                throw new IllegalStateException(name + " has no public static long liveStores(): " + e, e);
            }
        }
        return Map.copyOf(counters);
    }
}
