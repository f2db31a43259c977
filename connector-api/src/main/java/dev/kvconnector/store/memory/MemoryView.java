package dev.kvconnector.store.memory;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreView} of a {@link MemoryStore}: holds one reference to an entry, as a reader's copy does, so that the
 * entry's block outlives a remove, replace or eviction until {@link #release()}.
 */
final class MemoryView implements StoreView {
    private final MemoryStore store;
    private MemoryStore.Entry entry;

    MemoryView(MemoryStore store) {
        this.store = store;
    }

    /** {@code view} as a handle of {@code store}, checked to be empty. */
    static MemoryView ownedBy(MemoryStore store, StoreView view, StoreKey key) {
        if (!(view instanceof MemoryView v) || v.store != store) {
            throw HandleErrors.foreignView(store.uri(), key.toString());
        }
        if (v.entry != null) {
            throw HandleErrors.viewStillHeld(store.uri(), key.toString());
        }
        return v;
    }

    /** Takes over a reference the store retained for this view. */
    void hold(MemoryStore.Entry e) {
        this.entry = e;
    }

    @Override
    public MemorySegment segment() {
        if (entry == null) {
            throw HandleErrors.noView(store.uri());
        }
        store.checkOpen("segment", null);
        return entry.readOnly;
    }

    @Override
    public boolean isHeld() {
        return entry != null;
    }

    @Override
    public void release() {
        if (entry == null) {
            throw HandleErrors.releasedTwice(store.uri());
        }
        MemoryStore.Entry e = entry;
        entry = null;
        e.release();
    }

    @Override
    public void close() {
        if (entry != null) {
            release();
        }
    }
}
