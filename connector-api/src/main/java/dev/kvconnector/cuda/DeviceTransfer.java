package dev.kvconnector.cuda;

import dev.kvconnector.connector.ChunkGeometry;
import dev.kvconnector.connector.ConnectorResources;
import dev.kvconnector.connector.InsertChannel;
import dev.kvconnector.connector.SinkTransfer;
import dev.kvconnector.codec.ObjectPlan;
import dev.kvconnector.paged.TokenSlots;
import java.lang.foreign.MemorySegment;

/**
 * One insert or drop-select call's device work: the request's slot mapping uploaded once, a lane (stream and
 * events) of the connector's {@link CudaStaging} ({@link ConnectorCuda}), and the per-layer gather or scatter between the device paged cache
 * and a device buffer laid out exactly like the host staging of {@link ChunkGeometry} (each chunk's object at its
 * offset, K then V after the 64-byte header). Host stores then copy that buffer to and from pooled pinned host
 * staging; a {@code DEVICE_MEMORY} store puts and gets the device buffer itself, with headers copied in and out.
 *
 * <p>Used by one thread at a time. {@link #close()} waits for the lane and releases every buffer still held.
 */
final class DeviceTransfer implements SinkTransfer {
    private final ConnectorResources connector;
    private final ChunkGeometry geo;
    private final ObjectPlan objects;
    private final DevicePagedKVCache cache;
    private final CudaStaging cuda;
    private final CudaStaging.Lane lane;
    private final MemorySegment slotMapping;
    private final boolean direct;
    /** Buffers of the insert pipeline's two stages, null once handed on; released by close() after a failure. */
    private final MemorySegment[] host = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final MemorySegment[] device = new MemorySegment[LayerStagingPipeline.BUFFERS];
    private final long[] startNanos = new long[LayerStagingPipeline.BUFFERS];

    DeviceTransfer(ConnectorResources connector, ChunkGeometry geo, DevicePagedKVCache cache, TokenSlots slots,
            String op) {
        this.connector = connector;
        this.geo = geo;
        this.objects = geo.objects();
        this.cache = cache;
        ConnectorCuda shared = ConnectorCuda.of(connector, cache, op);
        this.cuda = shared.staging();
        this.direct = shared.direct();
        this.lane = cuda.lane();
        int tokens = geo.totalTokens();
        long bytes = Math.max(Long.BYTES, (long) tokens * Long.BYTES);
        MemorySegment dev = null;
        MemorySegment staged = null;
        try {
            dev = cuda.acquire(bytes);
            staged = connector.acquireStaging(bytes);
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
                connector.releaseStaging(staged);
            }
        }
        this.slotMapping = dev;
    }

    /** Whether the store takes device buffers directly (GPUDirect) instead of host staging. */
    @Override
    public boolean direct() {
        return direct;
    }

    /** Enqueues the gather of the first {@code chunks} chunks of {@code layer} into the device buffer at {@code base}. */
    private void gather(int layer, long base, int chunks) {
        for (int c = 0; c < chunks; c++) {
            lane.gather(cache, layer, slotMapping.address() + (long) geo.startToken(c) * Long.BYTES, geo.tokens(c),
                    payloads(base, c));
        }
    }

    /** Enqueues the scatter of the first {@code chunks} chunks of {@code layer} from the device buffer at {@code base}. */
    private void scatter(int layer, long base, int chunks) {
        for (int c = 0; c < chunks; c++) {
            lane.scatter(cache, layer, slotMapping.address() + (long) geo.startToken(c) * Long.BYTES, geo.tokens(c),
                    payloads(base, c));
        }
    }

    private long[] payloads(long base, int c) {
        long[] flat = new long[geo.tensors()];
        for (int t = 0; t < flat.length; t++) {
            flat[t] = base + geo.layerOffset(c) + geo.tensorPayloadOffset(c, t);
        }
        return flat;
    }

    /**
     * The insert's {@link LayerStagingPipeline.Stages} for layers {@code first, first + 1, ...}: a copy gathers the
     * layer on the GPU and copies it into a pooled pinned host lease (or, for a direct store, copies the headers
     * into the device buffer); a put hands the lease or the device buffer to the insert's asynchronous put, which
     * releases it when the store is done.
     */
    LayerStagingPipeline.Stages insertStages(InsertChannel session, int first) {
        return new LayerStagingPipeline.Stages() {
            @Override
            public void startCopy(int i, int b) {
                int layer = first + i;
                int chunks = geo.chunkCount();
                startNanos[b] = System.nanoTime();
                device[b] = cuda.acquire(geo.layerStagingBytes());
                long base = device[b].address();
                gather(layer, base, chunks);
                if (direct) {
                    long headerBytes = objects.headerBytes();
                    host[b] = session.acquireStaging(chunks * headerBytes);
                    for (int c = 0; c < chunks; c++) {
                        MemorySegment header = host[b].asSlice(c * headerBytes, headerBytes);
                        objects.sealDetached(c, layer, header);
                        lane.toDevice(base + geo.layerOffset(c), header);
                    }
                } else {
                    host[b] = session.acquireStaging(geo.layerStagingBytes());
                    lane.toHost(host[b].asSlice(0, geo.objectsBytes(chunks)), base);
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
                    session.releaseStaging(h);
                    MemorySegment[] layerObjects = new MemorySegment[geo.chunkCount()];
                    for (int c = 0; c < layerObjects.length; c++) {
                        layerObjects[c] = d.asSlice(geo.layerOffset(c), geo.layerObjectBytes(c));
                    }
                    session.submitDetached(layer, layerObjects, d, cuda::release, startNanos[b]);
                } else {
                    cuda.release(d);
                    session.submitStaged(layer, h, startNanos[b]);
                }
            }
        };
    }

    /**
     * Drop-select from a host store: copies the first {@code chunks} validated objects of {@code layer} from host
     * staging (pooled, pinned) to the device and scatters them into the cache; returns when the cache holds them.
     */
    @Override
    public void fromHost(int layer, MemorySegment staging, int chunks) {
        MemorySegment dev = cuda.acquire(geo.layerStagingBytes());
        try {
            lane.toDevice(dev.address(), staging.asSlice(0, geo.objectsBytes(chunks)));
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
    @Override
    public MemorySegment acquireLayer() {
        return cuda.acquire(geo.layerStagingBytes());
    }

    /** Returns a buffer from {@link #acquireLayer}. */
    @Override
    public void release(MemorySegment deviceLayer) {
        cuda.release(deviceLayer);
    }

    /** Copies the first {@code chunks} objects' headers from a device layer buffer into host {@code headers}. */
    @Override
    public void copyHeaders(MemorySegment deviceLayer, MemorySegment headers, int chunks) {
        long headerBytes = objects.headerBytes();
        for (int c = 0; c < chunks; c++) {
            lane.toHost(headers.asSlice(c * headerBytes, headerBytes), deviceLayer.address() + geo.layerOffset(c));
        }
        lane.synchronize();
    }

    /** Scatters the first {@code chunks} objects of a device layer buffer into the cache; returns when done. */
    @Override
    public void fromDirect(int layer, MemorySegment deviceLayer, int chunks) {
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
                    connector.releaseStaging(host[b]);
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
