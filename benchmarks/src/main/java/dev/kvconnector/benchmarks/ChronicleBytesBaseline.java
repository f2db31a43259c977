package dev.kvconnector.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import net.openhft.chronicle.bytes.Bytes;
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
 * The off-heap library a low-latency Java user would otherwise pick: Chronicle Bytes, one layer written from one
 * {@code Bytes.allocateDirect} buffer into another.
 *
 * <p>Chronicle needs {@code --add-opens}/{@code --add-exports} on JDK 17+. They are given here, in this benchmark's
 * own forked JVM and nowhere else: the SDK never asks its users for them, and no other benchmark runs with them.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {
        "--enable-native-access=ALL-UNNAMED",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
        "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
        "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
        "-Dchronicle.analytics.disable=true"})
public class ChronicleBytesBaseline {
    /** Model preset whose layer is copied. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private Bytes<Void> src;
    private Bytes<Void> dst;
    private long bytes;

    /** Allocates both buffers and fills the source with the same bytes as the other benchmarks. */
    @Setup(Level.Trial)
    public void setUp() {
        bytes = LayerShape.layerBytes(model, tokens);
        src = Bytes.allocateDirect(bytes);
        dst = Bytes.allocateDirect(bytes);
        try (Arena arena = Arena.ofConfined()) {
            src.write(LayerShape.randomSegment(arena, bytes).toArray(ValueLayout.JAVA_BYTE));
        }
        copy();
        if (dst.readRemaining() != bytes || !dst.contentEquals(src)) {
            throw new IllegalStateException("Chronicle Bytes copied " + dst.readRemaining() + " of " + bytes + " bytes");
        }
    }

    /** Frees both buffers. */
    @TearDown(Level.Trial)
    public void tearDown() {
        src.releaseLast();
        dst.releaseLast();
    }

    /** Copies one layer: rewind the destination, write the whole source into it. */
    @Benchmark
    public Bytes<Void> copy() {
        dst.clear();
        dst.write(src, 0, bytes);
        return dst;
    }
}
