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
 * One layer's bytes through the {@code KVStore} SPI: {@code put} from a native segment and {@code getInto} a native
 * segment, for every store URI template in {@link #store} (see {@link StoreFixture} for the placeholders).
 * {@code benchmarks/run.sh} passes the stores this class path can open ({@link StoreCatalog}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class StoreLayerBenchmark {
    private static final String KEY = "bench/layer";

    /** Store URI template, for example {@code memory:}, {@code shm:/kvc-bench-{unique}} or {@code valkey://{redis}}. */
    @Param({"memory:?capacity=2GiB"})
    public String store;
    /** Model preset whose layer is moved. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private StoreFixture fixture;
    private KVStore kv;
    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;

    /** Starts the store's fixture, opens it and stores the layer once, so that {@link #getInto} always hits. */
    @Setup(Level.Trial)
    public void setUp() {
        long bytes = LayerShape.layerBytes(model, tokens);
        fixture = StoreFixture.start(store);
        kv = KVStores.open(fixture.uri());
        arena = Arena.ofShared();
        src = LayerShape.randomSegment(arena, bytes);
        dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
        kv.put(KEY, src, PutOptions.DEFAULT);
        long r = kv.getInto(KEY, dst);
        if (r != bytes || src.mismatch(dst) != -1) {
            throw new IllegalStateException(fixture.uri() + " did not return the layer it stored: "
                    + GetResult.describe(r) + " for " + bytes + " bytes");
        }
    }

    /** Closes the store and stops its fixture. */
    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            if (!kv.uri().startsWith("lm:")) {
                // The LMCache protocol has no delete; the in-process server is stopped with the fixture instead.
                kv.remove(KEY);
            }
            kv.close();
        } finally {
            fixture.close();
            arena.close();
        }
    }

    /** Stores one layer, replacing the previous one under the same key. */
    @Benchmark
    public boolean put() {
        return kv.put(KEY, src, PutOptions.DEFAULT);
    }

    /** Reads one layer into a native segment; the result is bytes copied. */
    @Benchmark
    public long getInto() {
        return kv.getInto(KEY, dst);
    }
}
