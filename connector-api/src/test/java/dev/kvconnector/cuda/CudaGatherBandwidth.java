package dev.kvconnector.cuda;

import dev.kvconnector.cuda.CudaPagedKernels.DeviceIndex;
import dev.kvconnector.cuda.CudaPagedKernels.DeviceLayer;
import dev.kvconnector.cuda.PagedKernelGeometry.Index;
import dev.kvconnector.layout.KVLayout;
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
 * memory traffic is twice that (each byte read and written). Run by {@code native/cuda/device-check.sh}; a
 * measurement, not a test.
 */
public final class CudaGatherBandwidth {
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
            report("gather (paged -> contiguous)", gpu, iterations, requestBytes, () -> {
                for (int i = 0; i < layers.length; i++) {
                    long base = flat + 2L * i * tensorBytes;
                    kernels.gather(gpu.stream, layers[i], index, base, base + tensorBytes);
                }
            });
            report("scatter (contiguous -> paged)", gpu, iterations, requestBytes, () -> {
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
            report("cuMemcpyDtoDAsync x1 (whole request)", gpu, iterations, requestBytes,
                    () -> gpu.driver.memcpyDtoDAsync(copy, flat, requestBytes, gpu.stream));
        }
    }

    private static void report(String what, CudaDeviceFixture gpu, int iterations, long bytes, Runnable request) {
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
            System.out.printf("%-46s %8.1f us/request %8.1f GB/s%n", what, ms * 1e3, bytes / (ms / 1e3) / 1e9);
        } finally {
            gpu.driver.eventDestroy(start);
            gpu.driver.eventDestroy(end);
        }
    }
}
