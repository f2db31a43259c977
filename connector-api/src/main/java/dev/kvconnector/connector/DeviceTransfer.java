package dev.kvconnector.connector;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.cuda.CudaStaging;
import dev.kvconnector.cuda.DevicePagedKVCache;
import dev.kvconnector.cuda.LayerStagingPipeline;
import dev.kvconnector.paged.TokenSlots;
import java.lang.foreign.MemorySegment;

/**
 * One insert or drop-select call's device work: the request's slot mapping uploaded once, a lane (stream and
 * events) of the connector's {@link CudaStaging}, and the per-layer gather or scatter between the device paged cache
 * and a device buffer laid out exactly like the host staging of {@link ChunkGeometry} (each chunk's object at its
 * offset, K then V after the 64-byte header). Host stores then copy that buffer to and from pooled pinned host
 * staging; a {@code DEVICE_MEMORY} store puts and gets the device buffer itself, with headers copied in and out.
 *
 * <p>Used by one thread at a time. {@link #close()} waits for the lane and releases every buffer still held.
 */
final class DeviceTransfer implements AutoCloseable {
    private final KVStoreConnector connector;
    private final ChunkGeometry geo;
    private final DevicePagedKVCache cache;
    private final CudaStaging cuda;
    private final CudaStaging.Lane lane;
    private final MemorySegment slotMapping;
    private final boolean direct;
    /** Buffers of the insert pipeline's two stages, null once handed on; released by close() after a failure. */
    private final MemorySegment[] host = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final MemorySegment[] device = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final long[] startNanos = new long[LayerStagingPipeline.BUFFERS];

    DeviceTransfer(KVStoreConnector connector, ChunkGeometry geo, DevicePagedKVCache cache, TokenSlots slots,
            String op) {
        this.connector = connector;
        this.geo = geo;
        this.cache = cache;
        this.cuda = connector.cuda(cache, op);
        this.direct = connector.deviceDirect();
        this.lane = cuda.lane();
        int tokens = geo.plan.totalTokens();
        long bytes = Math.max(Long.BYTES, (long) tokens * Long.BYTES);
        MemorySegment dev = null;
        MemorySegment staged = null;
        try {
            dev = cuda.acquire(bytes);
            staged = connector.staging().acquire(bytes);
            cache.writeSlotMapping(slots, tokens, staged);
            lane.toDevice(dev.address(), staged.asSlice(0, bytes));
            lane.synchronize();
        } catch (RuntimeException e) {
            if (dev != null) {
                cuda.release(dev);
            }
            lane.close();
            throw e;
        } finally {
            if (staged != null) {
                connector.staging().release(staged);
            }
        }
        this.slotMapping = dev;
    }

    /** Whether the store takes device buffers directly (GPUDirect) instead of host staging. */
    boolean direct() {
        return direct;
    }

    /** Enqueues the gather of the first {@code chunks} chunks of {@code layer} into the device buffer at {@code base}. */
    private void gather(int layer, long base, int chunks) {
        for (int c = 0; c < chunks; c++) {
            lane.gather(cache, layer, slotMapping.address() + (long) geo.chunks[c].startToken() * Long.BYTES,
                    geo.chunks[c].tokens(), payloads(base, c));
        }
    }

    /** Enqueues the scatter of the first {@code chunks} chunks of {@code layer} from the device buffer at {@code base}. */
    private void scatter(int layer, long base, int chunks) {
        for (int c = 0; c < chunks; c++) {
            lane.scatter(cache, layer, slotMapping.address() + (long) geo.chunks[c].startToken() * Long.BYTES,
                    geo.chunks[c].tokens(), payloads(base, c));
        }
    }

    private long[] payloads(long base, int c) {
        long[] flat = new long[geo.tensors];
        for (int t = 0; t < geo.tensors; t++) {
            flat[t] = base + geo.layerOffsets[c] + geo.tensorPayloadOffset(c, t);
        }
        return flat;
    }

    /** Bytes of a layer's staging that hold the first {@code chunks} chunks' objects. */
    private long objectsBytes(int chunks) {
        return geo.layerOffsets[chunks - 1] + geo.layerObjectBytes(chunks - 1);
    }

    /**
     * The insert's {@link LayerStagingPipeline.Stages} for layers {@code first, first + 1, ...}: a copy gathers the
     * layer on the GPU and copies it into a pooled pinned host lease (or, for a direct store, copies the headers
     * into the device buffer); a put hands the lease or the device buffer to the session's asynchronous put, which
     * releases it when the store is done.
     */
    LayerStagingPipeline.Stages insertStages(InsertSession session, int first) {
        return new LayerStagingPipeline.Stages() {
            @Override
            public void startCopy(int i, int b) {
                int layer = first + i;
                int chunks = geo.chunks.length;
                startNanos[b] = System.nanoTime();
                device[b] = cuda.acquire(geo.layerStagingBytes);
                long base = device[b].address();
                gather(layer, base, chunks);
                if (direct) {
                    host[b] = session.acquire((long) chunks * RawTensorFormat.HEADER_BYTES);
                    for (int c = 0; c < chunks; c++) {
                        MemorySegment header = host[b].asSlice((long) c * RawTensorFormat.HEADER_BYTES,
                                RawTensorFormat.HEADER_BYTES);
                        RawTensorFormat.writeDetachedHeader(header, geo.layerSpecs[c], geo.chunks[c].tokens(),
                                connector.fingerprint());
                        lane.toDevice(base + geo.layerOffsets[c], header);
                    }
                } else {
                    host[b] = session.acquire(geo.layerStagingBytes);
                    lane.toHost(host[b].asSlice(0, objectsBytes(chunks)), base);
                }
                lane.record(b);
            }

            @Override
            public void awaitCopy(int b) {
                lane.await(b);
            }

            @Override
            public void put(int i, int b) {
                int layer = first + i;
                MemorySegment h = host[b];
                MemorySegment d = device[b];
                host[b] = null;
                device[b] = null;
                if (direct) {
                    connector.staging().release(h);
                    MemorySegment[] objects = new MemorySegment[geo.chunks.length];
                    for (int c = 0; c < objects.length; c++) {
                        objects[c] = d.asSlice(geo.layerOffsets[c], geo.layerObjectBytes(c));
                    }
                    session.submitDeviceLayer(layer, objects, d, startNanos[b]);
                } else {
                    cuda.release(d);
                    session.submitLayer(layer, h, startNanos[b]);
                }
            }
        };
    }

    /**
     * Drop-select from a host store: copies the first {@code chunks} validated objects of {@code layer} from host
     * staging (pooled, pinned) to the device and scatters them into the cache; returns when the cache holds them.
     */
    void scatterFromHost(int layer, MemorySegment staging, int chunks) {
        MemorySegment dev = cuda.acquire(geo.layerStagingBytes);
        try {
            lane.toDevice(dev.address(), staging.asSlice(0, objectsBytes(chunks)));
            scatter(layer, dev.address(), chunks);
        } finally {
            try {
                lane.synchronize();
            } finally {
                cuda.release(dev);
            }
        }
    }

    /** A device buffer for one layer's objects, registered with a direct store; give it back with {@link #release}. */
    MemorySegment acquireLayer() {
        return cuda.acquire(geo.layerStagingBytes);
    }

    /** Returns a buffer from {@link #acquireLayer}. */
    void release(MemorySegment deviceLayer) {
        cuda.release(deviceLayer);
    }

    /** Chunk {@code c}'s object inside a device layer buffer. */
    MemorySegment object(MemorySegment deviceLayer, int c) {
        return deviceLayer.asSlice(geo.layerOffsets[c], geo.layerObjectBytes(c));
    }

    /** Copies the first {@code chunks} objects' headers from a device layer buffer into host {@code headers}. */
    void copyHeaders(MemorySegment deviceLayer, MemorySegment headers, int chunks) {
        for (int c = 0; c < chunks; c++) {
            lane.toHost(headers.asSlice((long) c * RawTensorFormat.HEADER_BYTES, RawTensorFormat.HEADER_BYTES),
                    deviceLayer.address() + geo.layerOffsets[c]);
        }
        lane.synchronize();
    }

    /** Scatters the first {@code chunks} objects of a device layer buffer into the cache; returns when done. */
    void scatterFromDevice(int layer, MemorySegment deviceLayer, int chunks) {
        try {
            scatter(layer, deviceLayer.address(), chunks);
        } finally {
            lane.synchronize();
        }
    }

    @Override
    public void close() {
        try {
            lane.close();
        } finally {
            for (int b = 0; b < host.length; b++) {
                if (host[b] != null) {
                    connector.staging().release(host[b]);
                    host[b] = null;
                }
                if (device[b] != null) {
                    cuda.release(device[b]);
                    device[b] = null;
                }
            }
            cuda.release(slotMapping);
        }
    }
}
