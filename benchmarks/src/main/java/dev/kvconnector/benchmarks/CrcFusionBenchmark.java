package dev.kvconnector.benchmarks;

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
 * Whether the JDK's CRC32C keeps up with a copy, and what fusing it into a paged gather saves: one Llama-3-8B layer
 * at 1024 tokens (4 MiB: K and V, 64 blocks of 16 tokens each, 32 KiB per block and tensor) gathered from a paged
 * cache whose blocks sit in a shuffled order, as a block table scatters them.
 *
 * <ul>
 *   <li>{@link #copy4MiB} and {@link #crc4MiB}: one contiguous copy, and one CRC32C pass, of 4 MiB.</li>
 *   <li>{@link #gather}: the 128 block copies alone (the floor of a gather).</li>
 *   <li>{@link #gatherThenCrc}: the gather, then a separate CRC pass over the 4 MiB destination (today's insert).</li>
 *   <li>{@link #gatherFusedSliceBuffer}: after each block copy, CRC32C over the destination block while it is
 *       still in cache, through {@code asSlice(..).asByteBuffer()} per block (does that allocate?).</li>
 *   <li>{@link #gatherFusedReusedBuffer}: the same through one {@code ByteBuffer} over the destination, made once,
 *       moved with position and limit (allocates nothing by construction).</li>
 *   <li>{@link #copyFusedCrc64KiB}: a contiguous 4 MiB copy in 64 KiB chunks, each CRC'd after its copy.</li>
 * </ul>
 * Run with {@code -bm avgt -prof gc} to see the allocation per operation.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class CrcFusionBenchmark {
    static final long BLOCK_BYTES = 16 * 2048;
    static final int BLOCKS = 64;
    static final int CACHE_BLOCKS = 4 * BLOCKS;
    static final long LAYER_BYTES = 2 * BLOCKS * BLOCK_BYTES;
    static final long CHUNK_BYTES = 64 * 1024;

    private Arena arena;
    private MemorySegment[] paged;
    private MemorySegment src;
    private MemorySegment dst;
    private ByteBuffer dstBuffer;
    private int[] blockTable;
    private final CRC32C crc = new CRC32C();

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

    /** The gather, then one CRC pass over the destination. */
    @Benchmark
    public long gatherThenCrc() {
        gather();
        crc.reset();
        crc.update(dstBuffer.clear());
        return crc.getValue();
    }

    /** The gather with a CRC over each destination block after its copy, through a slice's ByteBuffer. */
    @Benchmark
    public long gatherFusedSliceBuffer() {
        crc.reset();
        long off = 0;
        for (MemorySegment tensor : paged) {
            for (int b : blockTable) {
                MemorySegment.copy(tensor, b * BLOCK_BYTES, dst, off, BLOCK_BYTES);
                crc.update(dst.asSlice(off, BLOCK_BYTES).asByteBuffer());
                off += BLOCK_BYTES;
            }
        }
        return crc.getValue();
    }

    /** The gather with a CRC over each destination block after its copy, through one reused ByteBuffer. */
    @Benchmark
    public long gatherFusedReusedBuffer() {
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

    /** A contiguous copy in 64 KiB chunks, each CRC'd right after its copy. */
    @Benchmark
    public long copyFusedCrc64KiB() {
        crc.reset();
        for (long off = 0; off < LAYER_BYTES; off += CHUNK_BYTES) {
            MemorySegment.copy(src, off, dst, off, CHUNK_BYTES);
            crc.update(dst.asSlice(off, CHUNK_BYTES).asByteBuffer());
        }
        return crc.getValue();
    }
}
