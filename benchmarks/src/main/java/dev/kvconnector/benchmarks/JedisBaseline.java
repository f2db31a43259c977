package dev.kvconnector.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
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
import redis.clients.jedis.Jedis;

/**
 * The other library a Java user would otherwise pick: Jedis, one blocking connection, {@code byte[]} keys and values,
 * against a fresh {@code redis-server} ({@link RedisServerFixture}). As in {@link LettuceBaseline}, each operation
 * includes the copy between the native segment and the {@code byte[]}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class JedisBaseline {
    private static final byte[] KEY = "bench/layer".getBytes(StandardCharsets.US_ASCII);

    /** Model preset whose layer is moved. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private RedisServerFixture server;
    private Jedis jedis;
    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;

    /** Starts the server, connects, and stores the layer once so that {@link #get} always hits. */
    @Setup(Level.Trial)
    public void setUp() {
        long bytes = LayerShape.layerBytes(model, tokens);
        server = RedisServerFixture.start();
        jedis = new Jedis("127.0.0.1", server.port());
        arena = Arena.ofShared();
        src = LayerShape.randomSegment(arena, bytes);
        dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
        set();
        get();
        if (src.mismatch(dst) != -1) {
            throw new IllegalStateException("Jedis did not return the layer it stored");
        }
    }

    /** Disconnects and stops the server. */
    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            jedis.close();
        } finally {
            server.close();
            arena.close();
        }
    }

    /** SET of one layer: copy the segment into a {@code byte[]}, then SET. */
    @Benchmark
    public String set() {
        return jedis.set(KEY, src.toArray(ValueLayout.JAVA_BYTE));
    }

    /** GET of one layer: GET a {@code byte[]}, then copy it into the segment. */
    @Benchmark
    public MemorySegment get() {
        byte[] v = jedis.get(KEY);
        MemorySegment.copy(v, 0, dst, ValueLayout.JAVA_BYTE, 0, v.length);
        return dst;
    }
}
