package dev.kvconnector.connector;

import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

/**
 * What an insert offers a {@link LayerSource} that moves its layers itself: the request's geometry, the
 * connector's pooled host staging and shared resources, and three ways to hand a layer on. Implemented by the
 * connector's insert; used by the session's thread only.
 */
public interface InsertChannel {
    /** Sizes and offsets of the request's layer objects. */
    ChunkGeometry geometry();

    /** The connector's staging pool, registrations and shared resources. */
    ConnectorResources resources();

    /**
     * Pooled host staging of at least {@code bytes} bytes; when the pool is full, waits for the insert's earlier
     * puts to give theirs back.
     */
    MemorySegment acquireStaging(long bytes);

    /** Gives back staging from {@link #acquireStaging} that was not handed on. */
    void releaseStaging(MemorySegment staging);

    /** Puts layer {@code layer} of a host source: the connector copies the tensors and puts them. */
    void putHost(int layer, HostLayerSource source);

    /**
     * Puts layer {@code layer} whose tensors are in place in {@code staging} (from {@link #acquireStaging}, laid out
     * as {@link #geometry()} says): the connector seals the objects, puts them asynchronously and then releases the
     * staging.
     *
     * @param startNanos {@link System#nanoTime()} when the layer's transfer began, for the metrics
     */
    void submitStaged(int layer, MemorySegment staging, long startNanos);

    /**
     * Puts layer {@code layer} whose objects, headers included, are ready in memory the CPU may not read: one per
     * chunk, slices of {@code lease}, given to a store that takes such memory; {@code releaseLease} gets the lease
     * back once the put is done.
     */
    void submitDetached(int layer, MemorySegment[] objects, MemorySegment lease, Consumer<MemorySegment> releaseLease,
                        long startNanos);
}
