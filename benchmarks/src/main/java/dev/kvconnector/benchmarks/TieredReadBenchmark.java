package dev.kvconnector.benchmarks;

import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What {@code tiered:} costs on a read, beside the tier that serves it alone, in one run: {@code getInto} of one
 * object of {@code bytes} bytes (4 MiB is one Llama-3-8B layer at 1024 tokens) through each {@code path}.
 *
 * <ul>
 *   <li>{@code local}: {@code memory:} alone; {@code tiered-local}: {@code tiered:[memory:][valkey://redis]},
 *       written through, so the first tier serves it. Compare these two.</li>
 *   <li>{@code remote}: {@code valkey://} alone, on a fresh {@code redis-server}; {@code tiered-remote}:
 *       {@code tiered:[memory:][valkey://redis]?promote=never} over an object put into redis alone, so every read
 *       misses the first tier and goes to the second. Compare these two.</li>
 * </ul>
 * The connector on top is the same for every store, so a store-level read isolates what the tier adds.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class TieredReadBenchmark {
    private static final String KEY = "kvc-bench:tiered";

    /** One store and one stored object for a trial. */
    @State(Scope.Thread)
    public static class Path {
        /** Which store reads: {@code local}, {@code tiered-local}, {@code remote} or {@code tiered-remote}. */
        @Param({"local", "tiered-local", "remote", "tiered-remote"})
        public String path;
        /** The object's size in bytes. */
        @Param({"4194304", "262144"})
        public long bytes;

        RedisServerFixture redis;
        KVStore store;
        Arena arena;
        MemorySegment dst;

        /** Starts redis where the path needs it, opens the store and puts the object where the path reads it. */
        @Setup(Level.Trial)
        public void setUp() {
            arena = Arena.ofShared();
            MemorySegment value = LayerShape.randomSegment(arena, bytes);
            dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
            if (path.equals("local")) {
                store = KVStores.open("memory:?capacity=64MiB");
                store.put(KEY, value, PutOptions.DEFAULT);
                return;
            }
            redis = RedisServerFixture.start();
            String valkey = "valkey://" + redis.hostPort();
            switch (path) {
                case "tiered-local" -> {
                    store = KVStores.open("tiered:[memory:?capacity=64MiB][" + valkey + "]");
                    store.put(KEY, value, PutOptions.DEFAULT);
                }
                case "remote" -> {
                    store = KVStores.open(valkey);
                    store.put(KEY, value, PutOptions.DEFAULT);
                }
                case "tiered-remote" -> {
                    try (KVStore remote = KVStores.open(valkey)) {
                        remote.put(KEY, value, PutOptions.DEFAULT);
                    }
                    store = KVStores.open("tiered:[memory:?capacity=64MiB][" + valkey + "]?promote=never");
                }
                default -> throw new IllegalArgumentException("path=" + path + " is not local, tiered-local, remote "
                        + "or tiered-remote");
            }
        }

        /** Closes the store and stops redis. */
        @TearDown(Level.Trial)
        public void tearDown() {
            try {
                store.close();
                arena.close();
            } finally {
                if (redis != null) {
                    redis.close();
                }
            }
        }
    }

    /** Reads the object; a miss or a short read fails the trial, since it would pass for a fast read. */
    @Benchmark
    public long getInto(Path p) {
        long r = p.store.getInto(KEY, p.dst);
        if (r != p.bytes) {
            throw new IllegalStateException(p.path + " read " + GetResult.describe(r) + ", not " + p.bytes + " bytes");
        }
        return r;
    }
}
