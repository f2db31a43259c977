package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

@RequiresCudaDevice
class CudaDeviceDriverTest {
    private CudaDeviceFixture gpu;

    @BeforeEach
    void open() {
        gpu = new CudaDeviceFixture();
    }

    @AfterEach
    void close() {
        gpu.close();
    }

    private static MemorySegment random(Arena arena, long bytes, long seed) {
        MemorySegment s = arena.allocate(bytes, 16);
        Random r = new Random(seed);
        for (long i = 0; i < bytes; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        return s;
    }

    @Test
    void hostToDeviceToDeviceToHostRoundTripsAndEventsTimeIt() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = random(arena, 3 << 20, 1);
            long a = gpu.upload(src);
            long b = gpu.alloc(src.byteSize());
            MemorySegment start = gpu.driver.eventCreate(0);
            MemorySegment end = gpu.driver.eventCreate(0);
            try {
                gpu.driver.eventRecord(start, gpu.stream);
                gpu.driver.memcpyDtoDAsync(b, a, src.byteSize(), gpu.stream);
                gpu.driver.eventRecord(end, gpu.stream);
                gpu.driver.eventSynchronize(end);
                assertTrue(gpu.driver.eventElapsedMillis(start, end) >= 0f);
            } finally {
                gpu.driver.eventDestroy(start);
                gpu.driver.eventDestroy(end);
            }
            assertEquals(-1L, src.mismatch(gpu.download(arena, b, src.byteSize())));
        }
    }

    @Test
    void absurdAllocationFailsAsNamedOutOfMemory() {
        KVException e = assertThrows(KVException.class, () -> gpu.driver.memAlloc(1L << 52));
        assertEquals(CudaResult.OUT_OF_MEMORY, e.nativeCode());
        assertEquals(ErrorCode.STORE_ERROR, e.code());
        assertTrue(e.getMessage().contains("CUDA_ERROR_OUT_OF_MEMORY"), e.getMessage());
    }

    @Test
    void registeredHostMemoryUnregistersOnceThenFailsNamed() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(1 << 20, 4096);
            gpu.driver.memHostRegister(host, CudaDriver.HOST_PORTABLE);
            gpu.driver.memHostUnregister(host);
            KVException e = assertThrows(KVException.class, () -> gpu.driver.memHostUnregister(host));
            assertEquals(713, e.nativeCode());
            assertTrue(e.getMessage().contains("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"), e.getMessage());
        }
    }

    @Test
    void pinnedStagingPutsEveryLayerInOrderWithItsBytes() {
        int layers = 6;
        long bytes = 1 << 20;
        try (Arena arena = Arena.ofConfined();
             PinnedLayerStaging staging = new PinnedLayerStaging(gpu.context, bytes)) {
            MemorySegment[] host = new MemorySegment[layers];
            long[] device = new long[layers];
            for (int l = 0; l < layers; l++) {
                host[l] = random(arena, bytes - l * 16L, 100 + l);
                device[l] = gpu.upload(host[l]);
            }
            List<Integer> seen = new ArrayList<>();
            staging.run(layers, new PinnedLayerStaging.DeviceLayers() {
                @Override
                public long address(int layer) {
                    return device[layer];
                }

                @Override
                public long bytes(int layer) {
                    return host[layer].byteSize();
                }
            }, (layer, staged) -> {
                assertEquals(-1L, host[layer].mismatch(staged), "layer " + layer);
                seen.add(layer);
            });
            assertEquals(List.of(0, 1, 2, 3, 4, 5), seen);
            KVException tooBig = assertThrows(KVException.class, () -> staging.run(1, new PinnedLayerStaging
                    .DeviceLayers() {
                @Override
                public long address(int layer) {
                    return device[0];
                }

                @Override
                public long bytes(int layer) {
                    return bytes + 1;
                }
            }, (layer, staged) -> { }));
            assertEquals(ErrorCode.VALUE_TOO_LARGE, tooBig.code());
        }
    }
}
