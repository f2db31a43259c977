package dev.kvconnector.store;

/**
 * Optional abilities a store declares, so the connector can choose a fast path without special cases. A caller
 * tests {@code store.capabilities().contains(...)}, never the store's class.
 */
public enum StoreCapability {
    /**
     * Implements {@link KVStore#tryClaim}: the caller reserves {@code n} bytes of the store's own memory under a key,
     * writes the value straight into the returned segment, then commits (visible) or aborts (freed), as Agrona's
     * {@code RingBuffer.tryClaim}/{@code commit}/{@code abort} do. A producer that gathers into a claim copies each
     * byte once instead of twice (gather into staging, then put).
     */
    CLAIM,
    /**
     * Implements {@link KVStore#tryView}: the caller reads a stored object in place, through a read-only segment
     * that stays valid until it releases the {@link StoreView}, whatever removes, evicts or replaces the key in the
     * meantime. A consumer that scatters from a view copies each byte once instead of twice.
     */
    VIEW,
    /**
     * {@link KVStore#remove} and the batch removes work. A store without it (the LMCache server protocol has no
     * delete) throws {@code UNSUPPORTED} from them; its entries leave by the store's own eviction.
     */
    REMOVE,
    /**
     * The store exploits {@link PutOptions#immutable()}: when the writer promises that a key's value never changes
     * (kvc-v1 keys are content-addressed), a put of an existing key skips the remove-before-put that a store which
     * never overwrites (Mooncake) otherwise needs, and keeps the value already stored. Stores without it accept the
     * option and put as usual.
     */
    IMMUTABLE,
    /** Implements {@link RegisteredMemory}: values from registered segments move without a staging copy. */
    REGISTERED_MEMORY,
    /**
     * With {@link #REGISTERED_MEMORY}: {@link RegisteredMemory#register} accepts CUDA device address ranges, and puts
     * from and gets into registered device memory move the bytes without the CPU touching them (GPUDirect RDMA). The
     * connector then registers its device staging buffers and hands device segments to the store, which must never
     * dereference them.
     */
    DEVICE_MEMORY,
    /**
     * Implements {@link KVStore#sendGetIntoBatch}: a batch read is sent at once and answered later, so that the
     * store (a server) prepares the next objects while the caller checks and copies the last ones.
     */
    PIPELINED_READ,
    /** Expires entries by itself when a put carries a TTL. */
    NATIVE_TTL,
    /** Overrides the batch operations with something faster than a loop (one round trip, one call). */
    BATCH,
    /**
     * Implements {@link KVStore#subscribe}: the store tells its subscribers what it stores and what leaves it, and
     * why ({@link StoreEvent.Type}: removed, evicted, expired), including changes made by other processes or clients
     * where the store is shared, numbered so that a subscriber sees a gap. {@code shm:} reads them from an event
     * ring in its file; {@code valkey://} from the server's keyspace notifications (when the server has them on).
     */
    EVENTS,
    /** Different processes opening the same URI see the same objects. */
    SHARED_ACROSS_PROCESSES,
    /**
     * Puts and gets are memory copies within this host's memory (no network, no device): there is no I/O to overlap
     * with compute, so the connector runs such puts on the caller's thread instead of handing them to I/O threads.
     */
    LOCAL_MEMORY
}
