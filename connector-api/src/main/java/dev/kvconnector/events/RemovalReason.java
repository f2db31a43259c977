package dev.kvconnector.events;

/** Why a chunk left a store or a cache. */
public enum RemovalReason {
    /** A drop-select in consume mode loaded it and removed it. */
    CONSUMED,
    /** The store evicted it to make room (told by stores that declare {@code StoreCapability.EVENTS}). */
    EVICTED,
    /** Its time to live ran out. */
    EXPIRED,
    /** Someone removed it on purpose (an operator, an abort of a visible entry). */
    REMOVED
}
