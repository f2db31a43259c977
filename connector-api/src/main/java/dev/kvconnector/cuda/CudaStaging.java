package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The device side of a connector's staging, for one GPU: the paged-KV kernels loaded into the device's primary
 * context, a bounded pool of device staging buffers in power-of-two size classes (allocated with {@code cuMemAlloc}
 * once and reused, like {@link dev.kvconnector.memory.SegmentPool} on the host), page-locking of the connector's host
 * staging segments ({@code cuMemHostRegister}, so device-to-host copies are DMA into pooled pinned memory), and a
 * pool of {@link Lane}s (a stream plus two events each) for the requests in flight.
 *
 * <p>A device buffer is a {@link MemorySegment} that carries the device address and size only: CPU code must never
 * read it. A store with {@code StoreCapability.DEVICE_MEMORY} gets each one registered once, as it is allocated
 * ({@code onNewDeviceSegment}), and puts from or gets into it directly (GPUDirect).
 *
 * <p>{@link #open} fails with a {@link KVException} that names what is missing: the driver library
 * ({@code UNSUPPORTED_MEMORY}), a device ({@code CUDA_ERROR_NO_DEVICE}), or the kernels (a build without nvcc).
 * Thread-safe; every method makes the device's context current on the calling thread where it calls the driver.
 */
public final class CudaStaging implements AutoCloseable {
    private static final int MIN_SHIFT = 12;
    private static final int MAX_SHIFT = 40;
    private static final AtomicLong LIVE_DEVICE_LEASES = new AtomicLong();

    private final CudaContext context;
    private final CudaDriver driver;
    private final CudaPagedKernels kernels;
    private final long maxDeviceBytes;
    private final Consumer<MemorySegment> onNewDeviceSegment;
    private final Consumer<MemorySegment> beforeDeviceFree;
    @SuppressWarnings("unchecked")
    private final ConcurrentLinkedDeque<MemorySegment>[] free = new ConcurrentLinkedDeque[MAX_SHIFT + 1];
    private final List<MemorySegment> deviceSegments = new ArrayList<>();
    private final AtomicLong allocatedBytes = new AtomicLong();
    private final AtomicLong leases = new AtomicLong();
    private final Map<Long, MemorySegment> pinned = new LinkedHashMap<>();
    private final ConcurrentLinkedDeque<Lane> idleLanes = new ConcurrentLinkedDeque<>();
    private final List<Lane> lanes = new ArrayList<>();
    private volatile boolean closed;

    private CudaStaging(CudaContext context, CudaPagedKernels kernels, long maxDeviceBytes,
            Consumer<MemorySegment> onNewDeviceSegment, Consumer<MemorySegment> beforeDeviceFree) {
        this.context = context;
        this.driver = context.driver();
        this.kernels = kernels;
        this.maxDeviceBytes = maxDeviceBytes;
        this.onNewDeviceSegment = onNewDeviceSegment;
        this.beforeDeviceFree = beforeDeviceFree;
        for (int i = 0; i < free.length; i++) {
            free[i] = new ConcurrentLinkedDeque<>();
        }
    }

    /**
     * Opens staging on visible device {@code ordinal}: retains its primary context and loads the kernels.
     *
     * @param maxDeviceBytes the bound of the device buffer pool, in bytes
     * @param onNewDeviceSegment called once for each device buffer allocated (to register it with a store)
     * @param beforeDeviceFree called for each device buffer before it is freed at {@link #close()}
     * @throws KVException naming what is missing: no libcuda, no device, no kernels
     */
    public static CudaStaging open(int ordinal, long maxDeviceBytes, Consumer<MemorySegment> onNewDeviceSegment,
            Consumer<MemorySegment> beforeDeviceFree) {
        CudaContext context;
        CudaPagedKernels kernels;
        try {
            context = CudaContext.primary(ordinal);
        } catch (KVException e) {
            throw missing(ordinal, e);
        }
        try {
            kernels = CudaPagedKernels.load(context);
        } catch (KVException e) {
            context.close();
            throw missing(ordinal, e);
        }
        return new CudaStaging(context, kernels, maxDeviceBytes, onNewDeviceSegment, beforeDeviceFree);
    }

    private static KVException missing(int ordinal, KVException e) {
        String inner = e.getMessage();
        String hintSuffix = ". Hint: " + e.hint();
        if (e.hint() != null && inner.endsWith(hintSuffix)) {
            inner = inner.substring(0, inner.length() - hintSuffix.length());
        }
        return KVException.of(e.code(), "device tensors on cuda:" + ordinal + " cannot be moved: " + inner)
                .operation("open CUDA staging").hint(e.hint()).nativeCode(e.nativeCode()).cause(e).build();
    }

    /** The visible ordinal of the device. */
    public int ordinal() {
        return context.ordinal();
    }

    /** Page-locks a host staging segment for DMA, once; later calls for the same segment do nothing. */
    public void pinHost(MemorySegment hostSegment) {
        synchronized (pinned) {
            checkOpen();
            if (!pinned.containsKey(hostSegment.address())) {
                context.makeCurrent();
                driver.memHostRegister(hostSegment, CudaDriver.HOST_PORTABLE);
                pinned.put(hostSegment.address(), hostSegment);
            }
        }
    }

    /** Host segments page-locked by {@link #pinHost}. */
    public int pinnedSegments() {
        synchronized (pinned) {
            return pinned.size();
        }
    }

    /**
     * Leases a device buffer of at least {@code bytes} bytes (256-byte aligned); give the same segment back with
     * {@link #release}.
     *
     * @throws KVException {@code STORE_FULL} when the pool's bound would be passed
     */
    public MemorySegment acquire(long bytes) {
        checkOpen();
        if (bytes <= 0 || bytes > 1L << MAX_SHIFT) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot stage " + bytes + " bytes on the device").build();
        }
        int shift = Math.max(MIN_SHIFT, 64 - Long.numberOfLeadingZeros(bytes - 1));
        MemorySegment s = free[shift].pollFirst();
        if (s == null) {
            s = allocate(shift, bytes);
        }
        leases.incrementAndGet();
        LIVE_DEVICE_LEASES.incrementAndGet();
        return s;
    }

    @SuppressWarnings("restricted")
    private MemorySegment allocate(int shift, long requested) {
        long size = 1L << shift;
        long now = allocatedBytes.addAndGet(size);
        if (now > maxDeviceBytes) {
            allocatedBytes.addAndGet(-size);
            throw KVException.of(ErrorCode.STORE_FULL, "device staging exhausted on cuda:" + ordinal() + ": "
                    + requested + " bytes requested (class " + size + "), " + (now - size) + " of " + maxDeviceBytes
                    + " bytes in use").operation("acquire")
                    .hint("raise the connector's stagingBytes, or finish earlier transfers first").build();
        }
        MemorySegment s;
        synchronized (deviceSegments) {
            checkOpen();
            context.makeCurrent();
            try {
                s = MemorySegment.ofAddress(driver.memAlloc(size)).reinterpret(size);
            } catch (KVException e) {
                allocatedBytes.addAndGet(-size);
                throw e;
            }
            deviceSegments.add(s);
        }
        onNewDeviceSegment.accept(s);
        return s;
    }

    /** Returns a device buffer from {@link #acquire} (the segment itself, not a slice). */
    public void release(MemorySegment deviceSegment) {
        int shift = Long.numberOfTrailingZeros(deviceSegment.byteSize());
        if (Long.bitCount(deviceSegment.byteSize()) != 1 || shift < MIN_SHIFT || shift > MAX_SHIFT) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "device segment of " + deviceSegment.byteSize()
                    + " bytes did not come from this pool; release what acquire() returned, not a slice").build();
        }
        leases.decrementAndGet();
        LIVE_DEVICE_LEASES.decrementAndGet();
        if (!closed) {
            free[shift].offerFirst(deviceSegment);
        }
    }

    /** Device bytes allocated by the pool. */
    public long allocatedDeviceBytes() {
        return allocatedBytes.get();
    }

    /** A lane for one request's copies, bound to the calling thread's context; close it to give it back. */
    public Lane lane() {
        checkOpen();
        context.makeCurrent();
        Lane lane = idleLanes.pollFirst();
        if (lane == null) {
            synchronized (lanes) {
                checkOpen();
                lane = new Lane();
                lanes.add(lane);
            }
        }
        return lane;
    }

    private void checkOpen() {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the CUDA staging of cuda:" + context.ordinal() + " is closed")
                    .build();
        }
    }

    /**
     * Waits for every lane, unpins the host segments, frees the device buffers (after {@code beforeDeviceFree}),
     * unloads the kernels and releases the context. Device buffers still leased are a caller bug, reported as
     * {@code INTERNAL} after everything is freed.
     */
    @Override
    public void close() {
        synchronized (lanes) {
            if (closed) {
                return;
            }
            closed = true;
        }
        context.makeCurrent();
        try {
            for (Lane lane : lanes) {
                lane.destroy();
            }
            synchronized (pinned) {
                for (MemorySegment s : pinned.values()) {
                    driver.memHostUnregister(s);
                }
                pinned.clear();
            }
            synchronized (deviceSegments) {
                for (MemorySegment s : deviceSegments) {
                    beforeDeviceFree.accept(s);
                    driver.memFree(s.address());
                }
                deviceSegments.clear();
            }
            kernels.close();
        } finally {
            context.close();
        }
        long out = leases.get();
        if (out != 0) {
            LIVE_DEVICE_LEASES.addAndGet(-out);
            throw KVException.of(ErrorCode.INTERNAL, "CUDA staging closed with " + out + " device buffers leased")
                    .hint("every acquire() needs a release() in a finally block").build();
        }
    }

    /** Device buffers leased and not yet released, across the process (for leak checks). */
    public static long liveDeviceLeases() {
        return LIVE_DEVICE_LEASES.get();
    }

    /**
     * One request's ordered work on the device: a non-blocking stream and two events, so that a
     * {@link LayerStagingPipeline} can wait for one staging buffer's copy while the other's is in flight. Use it from
     * one thread at a time; {@link #close()} gives it back to the pool.
     */
    public final class Lane implements AutoCloseable {
        private final MemorySegment stream;
        private final MemorySegment[] events = new MemorySegment[LayerStagingPipeline.BUFFERS];

        private Lane() {
            stream = driver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
            try {
                for (int i = 0; i < events.length; i++) {
                    events[i] = driver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
                }
            } catch (KVException e) {
                destroy();
                throw e;
            }
        }

        /**
         * Enqueues the gather of {@code tokens} tokens of {@code layer}: token {@code i}'s row of tensor {@code t}
         * goes to {@code flat[t] + i * tokenBytes}; {@code slotMapping} is the device address of the tokens'
         * {@code int64} slots.
         */
        public void gather(DevicePagedKVCache cache, int layer, long slotMapping, int tokens, long... flat) {
            kernels.gather(stream, cache.layer(layer), new CudaPagedKernels.DeviceIndex(
                    PagedKernelGeometry.Index.SLOTS, slotMapping, 0, tokens), flat);
        }

        /** Enqueues the scatter of {@code tokens} contiguous token rows per tensor back into their slots. */
        public void scatter(DevicePagedKVCache cache, int layer, long slotMapping, int tokens, long... flat) {
            kernels.scatter(stream, cache.layer(layer), new CudaPagedKernels.DeviceIndex(
                    PagedKernelGeometry.Index.SLOTS, slotMapping, 0, tokens), flat);
        }

        /** Enqueues a copy of all of host segment {@code src} (pinned for overlap) to device address {@code dst}. */
        public void toDevice(long dst, MemorySegment src) {
            driver.memcpyHtoDAsync(dst, src, stream);
        }

        /** Enqueues a copy from device address {@code src} filling all of host segment {@code dst}. */
        public void toHost(MemorySegment dst, long src) {
            driver.memcpyDtoHAsync(dst, src, stream);
        }

        /** Marks the end of the work enqueued so far with event {@code i} (0 or 1). */
        public void record(int i) {
            driver.eventRecord(events[i], stream);
        }

        /** Waits for the work before the last {@link #record(int)} of event {@code i}. */
        public void await(int i) {
            driver.eventSynchronize(events[i]);
        }

        /** Waits for everything enqueued on this lane. */
        public void synchronize() {
            driver.streamSynchronize(stream);
        }

        /** Waits for the lane's work and gives it back to the pool. */
        @Override
        public void close() {
            synchronize();
            if (!closed) {
                idleLanes.offerFirst(this);
            }
        }

        private void destroy() {
            driver.streamSynchronize(stream);
            for (MemorySegment e : events) {
                if (e != null) {
                    driver.eventDestroy(e);
                }
            }
            driver.streamDestroy(stream);
        }
    }
}
