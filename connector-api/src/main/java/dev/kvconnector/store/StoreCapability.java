package dev.kvconnector.store;

/** Optional abilities a store declares, so the connector can choose a fast path without special cases. */
public enum StoreCapability {
    /** Implements {@link RegisteredMemory}: values from registered segments move without a staging copy. */
    REGISTERED_MEMORY,
    /**
     * With {@link #REGISTERED_MEMORY}: {@link RegisteredMemory#register} accepts CUDA device address ranges, and puts
     * from and gets into registered device memory move the bytes without the CPU touching them (GPUDirect RDMA). The
     * connector then registers its device staging buffers and hands device segments to the store, which must never
     * dereference them.
     */
    DEVICE_MEMORY,
    /** Expires entries by itself when a put carries a TTL. */
    NATIVE_TTL,
    /** Overrides the batch operations with something faster than a loop (one round trip, one call). */
    BATCH,
    /** Different processes opening the same URI see the same objects. */
    SHARED_ACROSS_PROCESSES,
    /**
     * Puts and gets are memory copies within this host's memory (no network, no device): there is no I/O to overlap
     * with compute, so the connector runs such puts on the caller's thread instead of handing them to I/O threads.
     */
    LOCAL_MEMORY
}
