package dev.kvconnector.cuda;

import dev.kvconnector.cuda.CudaPagedKernels.DeviceIndex;
import dev.kvconnector.cuda.CudaPagedKernels.DeviceLayer;
import dev.kvconnector.cuda.PagedKernelGeometry.Index;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.store.memory.MemoryStore;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * Device bandwidth of the paged gather and scatter for one 1024-token llama3-8b request (32 layers, K and V of
 * 8 heads x 128 bf16, block 16: 128 MiB), timed with CUDA events, beside plain device-to-device copies of the same
 * bytes: 64 copies of one layer-tensor each, and one copy of all of it. GB/s is payload bytes (10^9) per second; the
 * memory traffic is twice that (each byte read and written). Then the whole connector device path for the same
 * request over the {@code memory:} store: insert ({@code putLayers}: gather, device-to-host into pinned staging,
 * put) and drop-select (get, host-to-device, scatter), timed on the host.
 *
 * <p>Prints one {@code goal:} line per kernel: gather and scatter against the one-copy {@code cuMemcpyDtoDAsync} of
 * the same bytes, goal above {@value #GOAL_PERCENT}%. Exits with status 3 when a goal is missed. Run by
 * {@code native/cuda/device-check.sh}; a measurement, not a test.
 */
public final class CudaGatherBandwidth {
    /** The goal: gather and scatter above this share of the device's copy bandwidth. */
    static final double GOAL_PERCENT = 70;

    private CudaGatherBandwidth() {
    }

    /** Args: {@code [iterations]} (default 50). */
    public static void main(String[] args) {
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 50;
        KVLayout l = KVLayout.preset("llama3-8b");
        int tokens = 1024;
        int numBlocks = 1024;
        long tokenBytes = l.bytesPerTokenPerTensor();
        long tensorBytes = tokens * tokenBytes;
        long requestBytes = l.numLayers() * l.tensorsPerLayer() * tensorBytes;
        CudaRuntime.Probe probe = CudaRuntime.probe();
        System.out.printf("driver %s, %s%n", probe.driverVersionText(), probe.devices());
        boolean met;
        try (CudaDeviceFixture gpu = new CudaDeviceFixture(); CudaPagedKernels kernels = CudaPagedKernels.load(
                gpu.context); Arena arena = Arena.ofConfined()) {
            List<Integer> all = new ArrayList<>();
            for (int i = 0; i < numBlocks; i++) {
                all.add(i);
            }
            Collections.shuffle(all, new Random(1));
            MemorySegment table = arena.allocate(ValueLayout.JAVA_INT, tokens / l.blockSize());
            for (int i = 0; i < tokens / l.blockSize(); i++) {
                table.setAtIndex(ValueLayout.JAVA_INT, i, all.get(i));
            }
            DeviceIndex index = new DeviceIndex(Index.BLOCKS, gpu.upload(table), l.blockSize(), tokens);
            DeviceLayer[] layers = new DeviceLayer[l.numLayers()];
            for (int i = 0; i < layers.length; i++) {
                layers[i] = new DeviceLayer(new long[] {gpu.alloc(numBlocks * l.blockBytes()),
                        gpu.alloc(numBlocks * l.blockBytes())}, (long) numBlocks * l.blockSize(), tokenBytes);
            }
            long flat = gpu.alloc(requestBytes);
            long copy = gpu.alloc(requestBytes);
            double gather = report("gather (paged -> contiguous)", gpu, iterations, requestBytes, () -> {
                for (int i = 0; i < layers.length; i++) {
                    long base = flat + 2L * i * tensorBytes;
                    kernels.gather(gpu.stream, layers[i], index, base, base + tensorBytes);
                }
            });
            double scatter = report("scatter (contiguous -> paged)", gpu, iterations, requestBytes, () -> {
                for (int i = 0; i < layers.length; i++) {
                    long base = flat + 2L * i * tensorBytes;
                    kernels.scatter(gpu.stream, layers[i], index, base, base + tensorBytes);
                }
            });
            report("cuMemcpyDtoDAsync x64 (one per layer-tensor)", gpu, iterations, requestBytes, () -> {
                for (int i = 0; i < 2 * layers.length; i++) {
                    gpu.driver.memcpyDtoDAsync(copy + i * tensorBytes, flat + i * tensorBytes, tensorBytes,
                            gpu.stream);
                }
            });
            double copyGBps = report("cuMemcpyDtoDAsync x1 (whole request)", gpu, iterations, requestBytes,
                    () -> gpu.driver.memcpyDtoDAsync(copy, flat, requestBytes, gpu.stream));
            connectorPath(l, layers, numBlocks, table, tokens, Math.max(3, iterations / 5), requestBytes);
            met = goal("gather", gather, copyGBps) & goal("scatter", scatter, copyGBps);
        }
        if (!met) {
            System.exit(3);
        }
    }

    private static boolean goal(String kernel, double kernelGBps, double copyGBps) {
        double percent = 100 * kernelGBps / copyGBps;
        boolean met = percent > GOAL_PERCENT;
        System.out.printf("goal: %-7s %5.1f%% of cuMemcpyDtoDAsync (%.1f of %.1f GB/s), goal above %.0f%%: %s%n",
                kernel, percent, kernelGBps, copyGBps, GOAL_PERCENT, met ? "MET" : "NOT MET");
        return met;
    }

    /** The connector's device path for the same request and cache, over memory:, timed on the host. */
    private static void connectorPath(KVLayout l, DeviceLayer[] layers, int numBlocks, MemorySegment table, int tokens,
            int iterations, long requestBytes) {
        long[][] addresses = new long[layers.length][];
        for (int i = 0; i < layers.length; i++) {
            addresses[i] = layers[i].cache();
        }
        DevicePagedKVCache cache = DevicePagedKVCache.wrap(l, numBlocks, 0, addresses);
        int[] blocks = new int[tokens / l.blockSize()];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = table.getAtIndex(ValueLayout.JAVA_INT, i);
        }
        BlockTable slots = new BlockTable(blocks, l.blockSize(), tokens);
        int[] ids = new int[tokens];
        try (MemoryStore store = MemoryStore.withCapacity(4 * requestBytes);
             KVStoreConnector connector = KVStoreConnector.builder(store, l).build()) {
            long insertNanos = 0;
            long dropNanos = 0;
            for (int i = -2; i < iterations; i++) {
                ids[0] = i + 10;
                RequestTokens request = RequestTokens.of(ids);
                long t0 = System.nanoTime();
                try (InsertSession insert = connector.beginInsert(request)) {
                    insert.putLayers(DeviceLayers.of(cache, slots));
                    insert.commit();
                }
                long t1 = System.nanoTime();
                DropResult r = connector.dropSelect(request, DropTarget.of(DeviceLayers.of(cache, slots)));
                long t2 = System.nanoTime();
                if (!r.isComplete()) {
                    throw new IllegalStateException("drop-select missed: " + r);
                }
                if (i >= 0) {
                    insertNanos += t1 - t0;
                    dropNanos += t2 - t1;
                }
            }
            printHostTimed("connector insert (putLayers, memory:)", insertNanos, iterations, requestBytes);
            printHostTimed("connector drop-select (device target, memory:)", dropNanos, iterations, requestBytes);
        }
    }

    private static void printHostTimed(String what, long nanos, int iterations, long bytes) {
        double ms = nanos / 1e6 / iterations;
        System.out.printf("%-46s %8.1f us/request %8.1f GB/s%n", what, ms * 1e3, bytes / (ms / 1e3) / 1e9);
    }

    private static double report(String what, CudaDeviceFixture gpu, int iterations, long bytes, Runnable request) {
        MemorySegment start = gpu.driver.eventCreate(0);
        MemorySegment end = gpu.driver.eventCreate(0);
        try {
            for (int i = 0; i < 5; i++) {
                request.run();
            }
            gpu.driver.eventRecord(start, gpu.stream);
            for (int i = 0; i < iterations; i++) {
                request.run();
            }
            gpu.driver.eventRecord(end, gpu.stream);
            gpu.driver.eventSynchronize(end);
            double ms = gpu.driver.eventElapsedMillis(start, end) / iterations;
            double gbps = bytes / (ms / 1e3) / 1e9;
            System.out.printf("%-46s %8.1f us/request %8.1f GB/s%n", what, ms * 1e3, gbps);
            return gbps;
        } finally {
            gpu.driver.eventDestroy(start);
            gpu.driver.eventDestroy(end);
        }
    }
}
