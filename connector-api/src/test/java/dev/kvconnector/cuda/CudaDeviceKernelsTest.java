package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kvconnector.cuda.CudaPagedKernels.DeviceIndex;
import dev.kvconnector.cuda.CudaPagedKernels.DeviceLayer;
import dev.kvconnector.cuda.PagedKernelGeometry.Index;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The kernels against connector-api's host implementation ({@link PagedKVCache}) and hand-computed rows. */
@RequiresCudaDevice
class CudaDeviceKernelsTest {
    private CudaDeviceFixture gpu;
    private CudaPagedKernels kernels;

    @BeforeEach
    void open() {
        gpu = new CudaDeviceFixture();
        kernels = CudaPagedKernels.load(gpu.context);
    }

    @AfterEach
    void close() {
        try {
            kernels.close();
        } finally {
            gpu.close();
        }
    }

    private static void fillRandom(MemorySegment s, long seed) {
        Random r = new Random(seed);
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
    }

    private static int[] shuffledBlocks(int numBlocks, int count, long seed) {
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < numBlocks; i++) {
            all.add(i);
        }
        Collections.shuffle(all, new Random(seed));
        return all.subList(0, count).stream().mapToInt(Integer::intValue).toArray();
    }

    @Test
    void gatherThroughABlockTableMatchesTheHostPagedCacheForKAndV() {
        KVLayout layout = new KVLayout("one-layer-llama", AttentionKind.MHA, 1, 8, 128, DType.BF16, 16, 0);
        int numBlocks = 64;
        int tokens = 100;
        int[] blocks = shuffledBlocks(numBlocks, 7, 3);
        long tokenBytes = layout.bytesPerTokenPerTensor();
        try (Arena arena = Arena.ofConfined(); PagedKVCache host = PagedKVCache.allocate(layout, numBlocks)) {
            long[] cache = new long[2];
            long[] flat = new long[2];
            for (int t = 0; t < 2; t++) {
                fillRandom(host.tensor(0, t), 10 + t);
                cache[t] = gpu.upload(host.tensor(0, t));
                flat[t] = gpu.alloc(tokens * tokenBytes);
            }
            MemorySegment table = arena.allocate(ValueLayout.JAVA_INT, blocks.length);
            MemorySegment.copy(blocks, 0, table, ValueLayout.JAVA_INT, 0, blocks.length);
            PagedKernelGeometry g = kernels.gather(gpu.stream,
                    new DeviceLayer(cache, (long) numBlocks * layout.blockSize(), tokenBytes),
                    new DeviceIndex(Index.BLOCKS, gpu.upload(table), layout.blockSize(), tokens), flat);
            gpu.driver.streamSynchronize(gpu.stream);
            assertEquals("kvc_gather_blocks_v16", g.entry());
            BlockTable slots = new BlockTable(blocks, layout.blockSize(), tokens);
            for (int t = 0; t < 2; t++) {
                MemorySegment expected = arena.allocate(tokens * tokenBytes);
                host.gather(0, t, slots, 0, tokens, expected, 0);
                assertEquals(-1L, expected.mismatch(gpu.download(arena, flat[t], tokens * tokenBytes)), "tensor " + t);
            }
        }
    }

    /** Rows of 1152 bytes (MLA latent, v16), 12 bytes (v4) and 7 bytes (v1); padding and wild slots are skipped. */
    @ParameterizedTest
    @CsvSource({"1152, 1, v16", "12, 2, v4", "7, 2, v1"})
    void scatterThroughASlotMappingWritesOnlyValidSlots(long tokenBytes, int tensors, String width) {
        int cacheSlots = 512;
        int tokens = 40;
        try (Arena arena = Arena.ofConfined()) {
            long[] slots = new long[tokens];
            int[] order = shuffledBlocks(cacheSlots, tokens, 7);
            for (int i = 0; i < tokens; i++) {
                slots[i] = order[i];
            }
            slots[3] = -1;
            slots[5] = cacheSlots + 7;
            MemorySegment slotSegment = arena.allocate(ValueLayout.JAVA_LONG, tokens);
            MemorySegment.copy(slots, 0, slotSegment, ValueLayout.JAVA_LONG, 0, tokens);
            long[] cache = new long[tensors];
            long[] flat = new long[tensors];
            MemorySegment[] src = new MemorySegment[tensors];
            for (int t = 0; t < tensors; t++) {
                cache[t] = gpu.upload(arena.allocate(cacheSlots * tokenBytes, 16));
                src[t] = arena.allocate(tokens * tokenBytes, 16);
                fillRandom(src[t], 20 + t);
                flat[t] = gpu.upload(src[t]);
            }
            PagedKernelGeometry g = kernels.scatter(gpu.stream, new DeviceLayer(cache, cacheSlots, tokenBytes),
                    new DeviceIndex(Index.SLOTS, gpu.upload(slotSegment), 0, tokens), flat);
            gpu.driver.streamSynchronize(gpu.stream);
            assertEquals("kvc_scatter_slots_" + width, g.entry());
            for (int t = 0; t < tensors; t++) {
                MemorySegment expected = arena.allocate(cacheSlots * tokenBytes, 16);
                for (int i = 0; i < tokens; i++) {
                    if (slots[i] >= 0 && slots[i] < cacheSlots) {
                        MemorySegment.copy(src[t], i * tokenBytes, expected, slots[i] * tokenBytes, tokenBytes);
                    }
                }
                assertEquals(-1L, expected.mismatch(gpu.download(arena, cache[t], cacheSlots * tokenBytes)),
                        "tensor " + t);
            }
        }
    }

    @Test
    void misalignedContiguousRegionFallsBackToNarrowerVectorsAndStillGathers() {
        long tokenBytes = 256;
        int cacheSlots = 64;
        int tokens = 9;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment hostCache = arena.allocate(cacheSlots * tokenBytes, 16);
            fillRandom(hostCache, 5);
            long cache = gpu.upload(hostCache);
            long flat = gpu.alloc(tokens * tokenBytes + 16) + 4;
            MemorySegment slotSegment = arena.allocate(ValueLayout.JAVA_LONG, tokens);
            for (int i = 0; i < tokens; i++) {
                slotSegment.setAtIndex(ValueLayout.JAVA_LONG, i, 63 - 7L * i);
            }
            PagedKernelGeometry g = kernels.gather(gpu.stream, new DeviceLayer(new long[] {cache}, cacheSlots,
                    tokenBytes), new DeviceIndex(Index.SLOTS, gpu.upload(slotSegment), 0, tokens), flat);
            gpu.driver.streamSynchronize(gpu.stream);
            assertEquals(4, g.vectorBytes());
            MemorySegment got = gpu.download(arena, flat, tokens * tokenBytes);
            for (int i = 0; i < tokens; i++) {
                assertEquals(-1L, hostCache.asSlice((63 - 7L * i) * tokenBytes, tokenBytes)
                        .mismatch(got.asSlice(i * tokenBytes, tokenBytes)), "token " + i);
            }
        }
    }
}
