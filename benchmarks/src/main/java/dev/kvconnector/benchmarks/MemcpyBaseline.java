package dev.kvconnector.benchmarks;

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
 * The memory floor: {@code MemorySegment.copy} of one layer between two native segments. Every in-process store's
 * put and get is compared with this, since each must copy the layer at least once.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class MemcpyBaseline {
    /** Model preset whose layer is copied. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;
    private long bytes;

    /** Allocates and fills both segments once per trial. */
    @Setup(Level.Trial)
    public void setUp() {
        bytes = LayerShape.layerBytes(model, tokens);
        arena = Arena.ofShared();
        src = LayerShape.randomSegment(arena, bytes);
        dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
    }

    /** Frees both segments. */
    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    /** Copies one layer; returns the destination so the copy cannot be removed as dead code. */
    @Benchmark
    public MemorySegment copy() {
        MemorySegment.copy(src, 0, dst, 0, bytes);
        return dst;
    }
}
