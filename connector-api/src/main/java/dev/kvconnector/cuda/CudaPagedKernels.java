package dev.kvconnector.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * The paged-KV gather and scatter kernels ({@code native/cuda/paged_kv.cu}) loaded into a context: moves one layer's
 * token rows between a device-resident paged cache and contiguous device regions, in one launch per layer for K
 * and V together (or the MLA latent alone).
 *
 * <p>Indices are device-resident, as the engine keeps them: a slot mapping or a block table. A negative slot or
 * block id is padding and is skipped; a slot at or beyond the cache's slot count is skipped too, so a wrong index
 * cannot write outside the cache (the kernel cannot report it; validate host-side indices before uploading them).
 *
 * <p>Launches are enqueued on the caller's stream and return at once; order them against the engine's work with
 * events. Thread safety: launches are serialised on this object (they only enqueue, which takes microseconds);
 * the calling thread must have the context current.
 */
public final class CudaPagedKernels implements AutoCloseable {
    private static final int PARAMS = 9;

    private final CudaDriver driver;
    private final MemorySegment module;
    private final Map<String, MemorySegment> functions = new HashMap<>();
    private final Arena arena = Arena.ofShared();
    /** Argument values, one 8-byte slot each, in the kernel's parameter order. */
    private final MemorySegment values;
    /** The {@code void**} the driver reads: the address of each value slot. */
    private final MemorySegment params;
    private boolean closed;

    /**
     * One layer of a device-resident paged cache.
     *
     * @param cache the device base address of each tensor's paged cache (1 for MLA, 2 for K and V)
     * @param cacheSlots slots per tensor ({@code numBlocks * blockSize}); rows at or beyond it are never touched
     * @param tokenBytes bytes per slot per tensor ({@code kvHeads * headSize * dtype width})
     */
    public record DeviceLayer(long[] cache, long cacheSlots, long tokenBytes) {
        /** Copies the array and checks the counts. */
        public DeviceLayer {
            cache = cache.clone();
            if (cacheSlots <= 0 || tokenBytes <= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cacheSlots=" + cacheSlots + " tokenBytes="
                        + tokenBytes + ": both must be above 0").build();
            }
        }
    }

    /**
     * A request's slots, on the device.
     *
     * @param kind slot mapping ({@code int64} per token) or block table ({@code int32} per block)
     * @param pointer device address of the index array: {@code tokens} slots, or {@code ceil(tokens / blockSize)}
     *     block ids (the kernel reads that many and cannot check the array's length)
     * @param blockSize tokens per block, for a block table (ignored for a slot mapping)
     * @param tokens tokens to move
     */
    public record DeviceIndex(PagedKernelGeometry.Index kind, long pointer, int blockSize, int tokens) {
        /** Checks the block size of a block table. */
        public DeviceIndex {
            if (kind == PagedKernelGeometry.Index.BLOCKS && blockSize <= 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "a block table needs blockSize above 0, not "
                        + blockSize).build();
            }
        }
    }

    private CudaPagedKernels(CudaDriver driver, PagedKvPtx ptx) {
        this.driver = driver;
        this.module = driver.moduleLoadPtx(ptx.text());
        try {
            for (String entry : PagedKvPtx.expectedEntries()) {
                functions.put(entry, driver.moduleFunction(module, entry));
            }
        } catch (KVException e) {
            driver.moduleUnload(module);
            arena.close();
            throw e;
        }
        values = arena.allocate(8L * PARAMS, 8);
        params = arena.allocate(ADDRESS, PARAMS);
        for (int i = 0; i < PARAMS; i++) {
            params.setAtIndex(ADDRESS, i, values.asSlice(8L * i, 8));
        }
    }

    /**
     * Loads the kernels ({@link PagedKvPtx#require()}) into the context current on this thread: the driver JIT
     * compiles the PTX for the device, which takes tens of ms once.
     */
    public static CudaPagedKernels load(CudaContext context) {
        context.makeCurrent();
        return new CudaPagedKernels(context.driver(), PagedKvPtx.require());
    }

    /** Copies the indexed rows of {@code layer} into {@code flat} (one contiguous device region per tensor). */
    public PagedKernelGeometry gather(MemorySegment stream, DeviceLayer layer, DeviceIndex index, long... flat) {
        return launch(PagedKernelGeometry.Direction.GATHER, stream, layer, index, flat);
    }

    /** Copies {@code flat} (one contiguous device region per tensor) into the indexed rows of {@code layer}. */
    public PagedKernelGeometry scatter(MemorySegment stream, DeviceLayer layer, DeviceIndex index, long... flat) {
        return launch(PagedKernelGeometry.Direction.SCATTER, stream, layer, index, flat);
    }

    private synchronized PagedKernelGeometry launch(PagedKernelGeometry.Direction direction, MemorySegment stream,
            DeviceLayer layer, DeviceIndex index, long[] flat) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the paged-KV kernels were unloaded").build();
        }
        long[] cache = layer.cache();
        if (flat.length != cache.length) {
            throw KVException.of(ErrorCode.SHAPE_MISMATCH, flat.length + " contiguous regions for " + cache.length
                    + " cache tensors").build();
        }
        long[] addresses = new long[cache.length * 2];
        System.arraycopy(cache, 0, addresses, 0, cache.length);
        System.arraycopy(flat, 0, addresses, cache.length, flat.length);
        PagedKernelGeometry g = PagedKernelGeometry.plan(direction, index.kind(), index.tokens(), layer.tokenBytes(),
                cache.length, addresses);
        if (g.empty()) {
            return g;
        }
        values.set(JAVA_LONG, 0, cache[0]);
        values.set(JAVA_LONG, 8, cache.length > 1 ? cache[1] : 0L);
        values.set(JAVA_LONG, 16, flat[0]);
        values.set(JAVA_LONG, 24, flat.length > 1 ? flat[1] : 0L);
        values.set(JAVA_LONG, 32, index.pointer());
        values.set(JAVA_INT, 40, index.blockSize());
        values.set(JAVA_INT, 48, index.tokens());
        values.set(JAVA_LONG, 56, layer.tokenBytes());
        values.set(JAVA_LONG, 64, layer.cacheSlots());
        driver.launchKernel(functions.get(g.entry()), g.gridX(), g.gridY(), 1, g.blockX(), g.blockY(), 1, 0, stream,
                params);
        return g;
    }

    /** Unloads the module; idempotent. Work already enqueued must have completed. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            try {
                driver.moduleUnload(module);
            } finally {
                arena.close();
            }
        }
    }
}
