package dev.kvconnector.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/** Device 0's primary context, a stream, and device allocations freed on close, for the GPU tests. */
final class CudaDeviceFixture implements AutoCloseable {
    final CudaContext context;
    final CudaDriver driver;
    final MemorySegment stream;
    private final List<Long> allocations = new ArrayList<>();

    CudaDeviceFixture() {
        context = CudaContext.primary(0);
        driver = context.driver();
        stream = driver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
    }

    /** {@code bytes} of device memory, freed on close. */
    long alloc(long bytes) {
        long p = driver.memAlloc(bytes);
        allocations.add(p);
        return p;
    }

    /** A device copy of {@code host}, freed on close. */
    long upload(MemorySegment host) {
        long p = alloc(host.byteSize());
        driver.memcpyHtoDAsync(p, host, stream);
        driver.streamSynchronize(stream);
        return p;
    }

    /** Device bytes copied into a new segment of {@code arena}. */
    MemorySegment download(Arena arena, long device, long bytes) {
        MemorySegment host = arena.allocate(bytes, 16);
        driver.memcpyDtoHAsync(host, device, stream);
        driver.streamSynchronize(stream);
        return host;
    }

    @Override
    public void close() {
        try {
            driver.streamSynchronize(stream);
            for (long p : allocations) {
                driver.memFree(p);
            }
            driver.streamDestroy(stream);
        } finally {
            context.close();
        }
    }
}
