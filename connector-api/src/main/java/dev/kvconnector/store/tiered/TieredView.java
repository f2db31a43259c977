package dev.kvconnector.store.tiered;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreView} of a {@link TieredStore}. A hit in the first tier holds that tier's own view, so the reader
 * reads the first tier's memory in place; a hit in a lower tier holds a buffer from the tiered store's pool that the
 * object was read into. Not thread-safe, like every view.
 */
final class TieredView implements StoreView {
    private final TieredStore store;
    final StoreView first;
    private MemorySegment copy;
    private MemorySegment copyReadOnly;

    TieredView(TieredStore store, StoreView first) {
        this.store = store;
        this.first = first;
    }

    /** {@code view} as a handle of {@code store}, checked to be empty. */
    static TieredView ownedBy(TieredStore store, StoreView view, String key) {
        if (!(view instanceof TieredView v) || v.store != store) {
            throw HandleErrors.foreignView(store.uri(), key);
        }
        if (v.isHeld()) {
            throw HandleErrors.viewStillHeld(store.uri(), key);
        }
        return v;
    }

    /** Holds {@code bytes} bytes of {@code buffer}, a pooled buffer that a lower tier's object was read into. */
    void holdCopy(MemorySegment buffer, long bytes) {
        copy = buffer;
        copyReadOnly = buffer.asSlice(0, bytes).asReadOnly();
    }

    /** In place when the first tier holds the object; a pooled copy of an object found lower is not. */
    @Override
    public boolean inPlace() {
        return first.isHeld();
    }

    @Override
    public MemorySegment segment() {
        if (first.isHeld()) {
            return first.segment();
        }
        if (copy == null) {
            throw HandleErrors.noView(store.uri());
        }
        store.checkOpen("segment", null);
        return copyReadOnly;
    }

    @Override
    public boolean isHeld() {
        return first.isHeld() || copy != null;
    }

    @Override
    public void release() {
        if (first.isHeld()) {
            first.release();
            return;
        }
        if (copy == null) {
            throw HandleErrors.releasedTwice(store.uri());
        }
        MemorySegment b = copy;
        copy = null;
        copyReadOnly = null;
        store.releaseBuffer(b);
    }

    @Override
    public void close() {
        if (isHeld()) {
            release();
        }
    }
}
