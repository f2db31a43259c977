package dev.kvconnector.store;

/**
 * One change to a store's objects, as the store itself tells it ({@link StoreCapability#EVENTS}): an object stored,
 * or one that left and why. Byte stores know nothing of chunks or tensors: an event names an object by its key, and
 * a connector maps keys back to chunks where its key scheme allows.
 *
 * <p>Numbering: every event of one subscription carries its source's {@code epoch} and a {@code sequence} that grows
 * by one per event within the epoch. A skipped number is a gap (events were lost: a receiver lapped by the
 * {@code shm:} ring, a {@code valkey://} subscription that reconnected); a new epoch is a source that started over.
 * Either way the subscriber's picture may be stale and it should resynchronise.
 *
 * @param epoch the source's epoch: differs for a recreated {@code shm:} file, a new {@code valkey://} subscription
 * @param sequence the event's number within its epoch, one more per event, a skip for every gap
 * @param type what happened
 * @param storeUri the store the object is in or left, secrets masked: the subscribed store, or for a
 *                 {@code tiered:} store the tier it happened in (a removal from every tier names the tiered store)
 * @param key the object's key
 * @param bytes the object's size in bytes, or -1 where the store does not tell it
 */
public record StoreEvent(long epoch, long sequence, Type type, String storeUri, String key, long bytes) {
    /** What happened to the object. */
    public enum Type {
        /** It was stored (put or a claim's commit), replacing any previous value. */
        STORED,
        /** Someone removed it. */
        REMOVED,
        /** The store evicted it to make room. */
        EVICTED,
        /** Its time to live ran out (told when the store notices, which may be later). */
        EXPIRED
    }

    /** Whether {@code next} follows this event with no gap: the same epoch, the next number. */
    public boolean isFollowedBy(StoreEvent next) {
        return next.epoch == epoch && next.sequence == sequence + 1;
    }
}
