package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;

/**
 * {@link LayerStagingPipeline.Stages} on a GPU: two page-locked host buffers of {@code capacityBytes} each, one
 * non-blocking stream for the device-to-host copies, and one event per buffer that marks its copy's end. Reuse one
 * instance per worker thread across requests; allocating pinned memory costs milliseconds.
 *
 * <p>Not thread safe: one {@link LayerStagingPipeline#run} at a time. The context must be current on the thread.
 */
public final class PinnedLayerStaging implements LayerStagingPipeline.Stages, AutoCloseable {
    /** Where each layer is on the device. */
    public interface DeviceLayers {
        /** The device address of {@code layer}'s contiguous bytes (for example gathered K then V). */
        long address(int layer);

        /** The byte count of {@code layer}. */
        long bytes(int layer);
    }

    /** Stores one staged layer. */
    @FunctionalInterface
    public interface LayerSink {
        /** Stores {@code layer}; {@code staged} is pinned host memory valid until this returns. */
        void put(int layer, MemorySegment staged);
    }

    private final CudaDriver driver;
    private final long capacityBytes;
    private final MemorySegment[] buffers = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final MemorySegment[] copied = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final long[] stagedBytes = new long[LayerStagingPipeline.BUFFERS];
    private final MemorySegment stream;
    private DeviceLayers source;
    private LayerSink sink;
    private boolean closed;

    /** Allocates the pinned buffers, the stream and the events in the context current on this thread. */
    public PinnedLayerStaging(CudaContext context, long capacityBytes) {
        this.driver = context.driver();
        this.capacityBytes = capacityBytes;
        context.makeCurrent();
        MemorySegment s = MemorySegment.NULL;
        try {
            for (int b = 0; b < buffers.length; b++) {
                buffers[b] = driver.memHostAlloc(capacityBytes, CudaDriver.HOST_PORTABLE);
                copied[b] = driver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING);
            }
            s = driver.streamCreate(CudaDriver.STREAM_NON_BLOCKING);
        } catch (KVException e) {
            release();
            throw e;
        }
        this.stream = s;
    }

    /** Stages layers {@code 0..layers-1} of {@code source} and hands each to {@code sink}, copy and put overlapped. */
    public void run(int layers, DeviceLayers source, LayerSink sink) {
        if (closed) {
            throw KVException.of(ErrorCode.CLOSED, "the pinned staging buffers were freed").build();
        }
        this.source = source;
        this.sink = sink;
        try {
            LayerStagingPipeline.run(layers, this);
        } finally {
            this.source = null;
            this.sink = null;
        }
    }

    @Override
    public void startCopy(int layer, int buffer) {
        long bytes = source.bytes(layer);
        if (bytes <= 0 || bytes > capacityBytes) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "layer " + layer + " holds " + bytes
                    + " bytes; the staging buffers hold 1.." + capacityBytes).build();
        }
        stagedBytes[buffer] = bytes;
        driver.memcpyDtoHAsync(buffers[buffer].asSlice(0, bytes), source.address(layer), stream);
        driver.eventRecord(copied[buffer], stream);
    }

    @Override
    public void awaitCopy(int buffer) {
        driver.eventSynchronize(copied[buffer]);
    }

    @Override
    public void put(int layer, int buffer) {
        sink.put(layer, buffers[buffer].asSlice(0, stagedBytes[buffer]));
    }

    /** Frees the buffers, events and stream, after waiting for the stream; idempotent. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            driver.streamSynchronize(stream);
            release();
        }
    }

    private void release() {
        if (stream != null && !stream.equals(MemorySegment.NULL)) {
            driver.streamDestroy(stream);
        }
        for (int b = 0; b < buffers.length; b++) {
            if (copied[b] != null) {
                driver.eventDestroy(copied[b]);
            }
            if (buffers[b] != null) {
                driver.memFreeHost(buffers[b]);
            }
        }
    }
}
