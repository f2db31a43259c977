package dev.kvconnector.connector;

import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * What a connector lends the sources and sinks that move layers themselves (device caches): its pooled host
 * staging, the store's memory registration, and resources shared by every transfer of the connector (a device
 * staging pool), opened on first use and closed with the connector. Thread-safe.
 */
public interface ConnectorResources {
    /** Where the connector moves KV (the store's URI, secrets masked), for errors. */
    String endpoint();

    /** The bound of the host staging pool in bytes (also the bound a device staging pool takes). */
    long stagingBytes();

    /** Pooled host staging of at least {@code bytes} bytes. */
    MemorySegment acquireStaging(long bytes);

    /** Gives back staging from {@link #acquireStaging}. */
    void releaseStaging(MemorySegment staging);

    /**
     * Runs {@code action} on every host staging segment the pool holds now and on every one it allocates later
     * (for example to page-lock them for DMA). A segment allocated meanwhile may see it twice.
     */
    void eachStagingSegment(Consumer<MemorySegment> action);

    /** Whether the store takes device memory directly ({@code DEVICE_MEMORY} with registration). */
    boolean storeTakesDeviceMemory();

    /** Registers memory with the store for zero-copy transfers; a no-op for a store without registration. */
    void register(MemorySegment segment);

    /** Undoes {@link #register}; a no-op for a store without registration. */
    void unregister(MemorySegment segment);

    /**
     * The connector's one resource of {@code type}, opened by {@code open} on first use and closed, before the
     * staging pool, when the connector closes.
     *
     * @throws KVException {@code CLOSED} once the connector is closed, or what {@code open} throws
     */
    <T extends AutoCloseable> T shared(Class<T> type, Supplier<T> open);
}
