package dev.kvconnector.store;

import java.lang.foreign.MemorySegment;

/**
 * A store that can register memory for zero-copy transfers (RDMA, GPUDirect). Stores that declare
 * {@link StoreCapability#REGISTERED_MEMORY} implement it; the connector registers its staging pool once.
 */
public interface RegisteredMemory {
    /** Registers {@code segment} (host or device address range); ranges must not overlap. */
    void register(MemorySegment segment);

    /** Releases a registration made by {@link #register}. */
    void unregister(MemorySegment segment);
}
