package dev.kvconnector.benchmarks;

import dev.kvconnector.memory.ChecksummedCopy;
import dev.kvconnector.memory.WordSum;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Which integrity check keeps up with a copy when fused into it: the JDK's CRC32C (the raw format's payload check in
 * version 1) against the {@link WordSum} (version 2), over one Llama-3-8B layer at 1024 tokens (4 MiB: K and V, 64
 * blocks of 16 tokens each, 32 KiB per block and tensor), copied contiguously or gathered from a paged cache whose
 * blocks sit in a shuffled order, as a block table scatters them. The layer stays in cache: these are the hot-layer
 * costs; {@code ConnectorBenchmark} measures a request that streams from memory.
 *
 * <ul>
 *   <li>{@link #copy4MiB}, {@link #crc4MiB}, {@link #sum4MiB}: one contiguous copy, one CRC32C pass and one word-sum
 *       pass, of 4 MiB.</li>
 *   <li>{@link #copyFusedCrc} and {@link #copyFusedSum}: the copy in {@link ChecksummedCopy#CHUNK_BYTES} chunks, each
 *       checked right after its copy while it is in cache; the CRC reads through one reused {@code ByteBuffer}
 *       (which allocates nothing), the sum straight from the segment ({@link ChecksummedCopy}).</li>
 *   <li>{@link #gather}: the 128 block copies alone (the floor of a gather); {@link #gatherFusedCrc} and
 *       {@link #gatherFusedSum}: the same with each block checked after its copy.</li>
 * </ul>
 * Run with {@code -bm avgt -prof gc} to see the allocation per operation.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ChecksumFusionBenchmark {
    static final long BLOCK_BYTES = 16 * 2048;
    static final int BLOCKS = 64;
    static final int CACHE_BLOCKS = 4 * BLOCKS;
    static final long LAYER_BYTES = 2 * BLOCKS * BLOCK_BYTES;

    private Arena arena;
    private MemorySegment[] paged;
    private MemorySegment src;
    private MemorySegment dst;
    private ByteBuffer dstBuffer;
    private int[] blockTable;
    private final CRC32C crc = new CRC32C();
    private final WordSum sum = new WordSum();

    /** Allocates a K and a V paged tensor of 256 blocks, a shuffled block table of 64, and the 4 MiB destination. */
    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        paged = new MemorySegment[] {LayerShape.randomSegment(arena, CACHE_BLOCKS * BLOCK_BYTES),
                LayerShape.randomSegment(arena, CACHE_BLOCKS * BLOCK_BYTES)};
        src = LayerShape.randomSegment(arena, LAYER_BYTES);
        dst = arena.allocate(LAYER_BYTES, LayerShape.ALIGNMENT);
        dstBuffer = dst.asByteBuffer();
        int[] all = new int[CACHE_BLOCKS];
        for (int i = 0; i < all.length; i++) {
            all[i] = i;
        }
        Random r = new Random(16);
        for (int i = all.length - 1; i > 0; i--) {
            int j = r.nextInt(i + 1);
            int t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        blockTable = java.util.Arrays.copyOf(all, BLOCKS);
    }

    /** Frees every segment. */
    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    /** One contiguous copy of 4 MiB. */
    @Benchmark
    public MemorySegment copy4MiB() {
        MemorySegment.copy(src, 0, dst, 0, LAYER_BYTES);
        return dst;
    }

    /** One CRC32C pass over 4 MiB. */
    @Benchmark
    public long crc4MiB() {
        crc.reset();
        crc.update(dstBuffer.clear());
        return crc.getValue();
    }

    /** One word-sum pass over 4 MiB. */
    @Benchmark
    public int sum4MiB() {
        sum.reset();
        sum.update(dst, 0, LAYER_BYTES);
        return sum.value();
    }

    /** The contiguous copy in chunks, each CRC'd right after its copy. */
    @Benchmark
    public long copyFusedCrc() {
        crc.reset();
        for (long off = 0; off < LAYER_BYTES; off += ChecksummedCopy.CHUNK_BYTES) {
            MemorySegment.copy(src, off, dst, off, ChecksummedCopy.CHUNK_BYTES);
            dstBuffer.limit((int) (off + ChecksummedCopy.CHUNK_BYTES)).position((int) off);
            crc.update(dstBuffer);
        }
        return crc.getValue();
    }

    /** The contiguous copy in chunks, each summed right after its copy: {@link ChecksummedCopy}. */
    @Benchmark
    public int copyFusedSum() {
        sum.reset();
        ChecksummedCopy.copy(src, 0, dst, 0, LAYER_BYTES, sum);
        return sum.value();
    }

    /** The gather of 128 blocks alone. */
    @Benchmark
    public MemorySegment gather() {
        long off = 0;
        for (MemorySegment tensor : paged) {
            for (int b : blockTable) {
                MemorySegment.copy(tensor, b * BLOCK_BYTES, dst, off, BLOCK_BYTES);
                off += BLOCK_BYTES;
            }
        }
        return dst;
    }

    /** The gather with a CRC over each destination block after its copy, through one reused ByteBuffer. */
    @Benchmark
    public long gatherFusedCrc() {
        crc.reset();
        long off = 0;
        for (MemorySegment tensor : paged) {
            for (int b : blockTable) {
                MemorySegment.copy(tensor, b * BLOCK_BYTES, dst, off, BLOCK_BYTES);
                dstBuffer.limit((int) (off + BLOCK_BYTES)).position((int) off);
                crc.update(dstBuffer);
                off += BLOCK_BYTES;
            }
        }
        return crc.getValue();
    }

    /** The gather with each destination block summed after its copy, as {@code PagedKVCache.gather} does. */
    @Benchmark
    public int gatherFusedSum() {
        sum.reset();
        long off = 0;
        for (MemorySegment tensor : paged) {
            for (int b : blockTable) {
                ChecksummedCopy.copy(tensor, b * BLOCK_BYTES, dst, off, BLOCK_BYTES, sum);
                off += BLOCK_BYTES;
            }
        }
        return sum.value();
    }
}
