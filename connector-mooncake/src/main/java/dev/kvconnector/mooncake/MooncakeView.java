package dev.kvconnector.mooncake;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreView} of a {@link MooncakeStore}: one registered staging slot that {@code get_into} filled, lent out
 * read-only until {@link #release()}. The bytes are this client's copy, so a remove, replace or eviction of the key
 * in the pool never touches them.
 */
final class MooncakeView implements StoreView {
    private final MooncakeStore store;
    private MemorySegment slot;
    private MemorySegment value;

    MooncakeView(MooncakeStore store) {
        this.store = store;
    }

    /** {@code view} as a handle of {@code store}, checked to be empty. */
    static MooncakeView ownedBy(MooncakeStore store, StoreView view, String key) {
        if (!(view instanceof MooncakeView v) || v.store != store) {
            throw HandleErrors.foreignView(store.uri(), key);
        }
        if (v.slot != null) {
            throw HandleErrors.viewStillHeld(store.uri(), key);
        }
        return v;
    }

    /** Holds {@code heldSlot}, of which the first {@code bytes} bytes are the object. */
    void hold(MemorySegment heldSlot, long bytes) {
        this.slot = heldSlot;
        this.value = heldSlot.asSlice(0, bytes).asReadOnly();
    }

    @Override
    public MemorySegment segment() {
        if (slot == null) {
            throw HandleErrors.noView(store.uri());
        }
        store.checkOpen("segment");
        return value;
    }

    @Override
    public boolean isHeld() {
        return slot != null;
    }

    @Override
    public void release() {
        if (slot == null) {
            throw HandleErrors.releasedTwice(store.uri());
        }
        MemorySegment s = slot;
        slot = null;
        value = null;
        store.returnSlot(s);
    }

    @Override
    public void close() {
        if (slot != null) {
            release();
        }
    }
}
