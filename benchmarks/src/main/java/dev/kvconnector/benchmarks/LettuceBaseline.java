package dev.kvconnector.benchmarks;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
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

/**
 * The library a Java user would otherwise pick for Redis or Valkey: Lettuce, synchronous API, {@code ByteArrayCodec},
 * one connection, against a fresh {@code redis-server} ({@link RedisServerFixture}).
 *
 * <p>The layer starts and ends in a native segment, as KV cache memory does, so each operation includes the copy
 * to or from the {@code byte[]} that Lettuce needs: that is the work a user of Lettuce would do to move a layer,
 * and the same work our {@code valkey://} store does without the intermediate array.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class LettuceBaseline {
    private static final byte[] KEY = "bench/layer".getBytes(StandardCharsets.US_ASCII);

    /** Model preset whose layer is moved. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private RedisServerFixture server;
    private RedisClient client;
    private StatefulRedisConnection<byte[], byte[]> connection;
    private RedisCommands<byte[], byte[]> redis;
    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;

    /** Starts the server, connects, and stores the layer once so that {@link #get} always hits. */
    @Setup(Level.Trial)
    public void setUp() {
        long bytes = LayerShape.layerBytes(model, tokens);
        server = RedisServerFixture.start();
        client = RedisClient.create(RedisURI.create("127.0.0.1", server.port()));
        connection = client.connect(ByteArrayCodec.INSTANCE);
        redis = connection.sync();
        arena = Arena.ofShared();
        src = LayerShape.randomSegment(arena, bytes);
        dst = arena.allocate(bytes, LayerShape.ALIGNMENT);
        set();
        get();
        if (src.mismatch(dst) != -1) {
            throw new IllegalStateException("Lettuce did not return the layer it stored");
        }
    }

    /** Disconnects and stops the server. */
    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            connection.close();
            client.shutdown();
        } finally {
            server.close();
            arena.close();
        }
    }

    /** SET of one layer: copy the segment into a {@code byte[]}, then SET. */
    @Benchmark
    public String set() {
        return redis.set(KEY, src.toArray(ValueLayout.JAVA_BYTE));
    }

    /** GET of one layer: GET a {@code byte[]}, then copy it into the segment. */
    @Benchmark
    public MemorySegment get() {
        byte[] v = redis.get(KEY);
        MemorySegment.copy(v, 0, dst, ValueLayout.JAVA_BYTE, 0, v.length);
        return dst;
    }
}
