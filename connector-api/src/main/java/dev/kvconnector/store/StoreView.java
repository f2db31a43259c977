package dev.kvconnector.store;

import java.lang.foreign.MemorySegment;

/**
 * A reusable handle on a stored object read in place by {@link KVStore#tryView}: a read-only segment over the
 * store's own memory, valid until {@link #release()}. While the handle holds the object, a remove, replace or
 * eviction of the key takes it out of the index but does not free or overwrite its bytes; they are freed on the
 * release (their bytes count against the store's capacity until then). One handle holds one object at a time and
 * is reused for the next, so a consumer allocates nothing per read. Not thread-safe.
 *
 * <pre>{@code
 * StoreView view = store.newView();                 // once, per consumer thread
 * long r = store.tryView(key, view);
 * if (GetResult.isHit(r)) {
 *     try {
 *         scatter(view.segment());                  // r bytes, read-only
 *     } finally {
 *         view.release();
 *     }
 * }
 * }</pre>
 */
public interface StoreView extends AutoCloseable {

    /**
     * The object's bytes, read-only. Once the store is closed this method throws {@code CLOSED}, and a segment
     * obtained before the close throws {@link IllegalStateException} on access: it never reads freed memory.
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} when the handle holds no object;
     *     {@code CLOSED} when the store is closed
     */
    MemorySegment segment();

    /** Whether the handle holds an object. */
    boolean isHeld();

    /**
     * Whether the object the handle holds lies in the store's own memory (a read in place), rather than in a copy
     * the store made for the view (a store over other stores, such as {@code tiered:}, views an object found in a
     * tier that cannot view as a pooled copy). A reader that finds its views are copies may read by batch instead.
     */
    default boolean inPlace() {
        return true;
    }

    /**
     * Gives the object back: its bytes may be freed from now on, and the handle is empty. Works after the store
     * closed (the bytes are freed then).
     *
     * @throws dev.kvconnector.error.KVException {@code INVALID_ARGUMENT} when the handle holds no object: a second
     *     release is a bug in the caller (it may have released another reader's object), so it is reported, not
     *     ignored
     */
    void release();

    /** Releases the object if the handle holds one; does nothing otherwise, so it is safe after {@link #release()}. */
    @Override
    void close();
}
