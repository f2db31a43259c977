package dev.kvconnector.benchmarks;

import dev.kvconnector.mooncake.MooncakeLibraryLocation;
import dev.kvconnector.mooncake.MooncakeStoreLibrary;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The FFM binding's cost per call: {@code mooncake_store_get_size} on the native test double through
 * {@link MooncakeStoreLibrary} (a NUL-terminated key from a confined arena per call, then the downcall). The same
 * call made from C is {@code native/target/lib/mooncake_call_cost}; {@code benchmarks/mooncake-call-cost.sh} runs
 * both and prints the difference, the binding's overhead (goal: below 2 us).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class MooncakeBindingBenchmark {
    private static final String KEY = "kvc-bench-key";
    private MooncakeStoreLibrary lib;
    private Arena arena;
    private MemorySegment store;

    @Setup(Level.Trial)
    public void open() {
        Path path = Path.of(System.getProperty("kvc.mooncake.double", "native/target/lib/libmooncake_store_double.so"))
                .toAbsolutePath();
        if (!Files.exists(path)) {
            throw new IllegalStateException("the Mooncake test double is not built at " + path
                    + " (run ./mvnw install with cmake and gcc present, or set -Dkvc.mooncake.double)");
        }
        lib = MooncakeStoreLibrary.load(new MooncakeLibraryLocation(path, path.getFileName().toString(), "benchmark"));
        arena = Arena.ofShared();
        store = lib.createOwnedBy(arena);
        int rc = lib.setup(store, "127.0.0.1", "P2PHANDSHAKE", 64L << 20, 1L << 20, "tcp", "", "127.0.0.1:50778");
        if (rc != 0) {
            throw new IllegalStateException("setup of the Mooncake test double returned " + rc);
        }
        MemorySegment value = arena.allocate(64);
        rc = lib.put(store, KEY, value, 64, null);
        if (rc != 0) {
            throw new IllegalStateException("put on the Mooncake test double returned " + rc);
        }
    }

    @TearDown(Level.Trial)
    public void close() {
        arena.close();
    }

    /** One binding call that does almost nothing in C: what remains is the binding's cost. */
    @Benchmark
    public long getSizeThroughTheBinding() {
        return lib.getSize(store, KEY);
    }
}
