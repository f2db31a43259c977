package dev.kvconnector.store.memory;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
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
    static MemoryView ownedBy(MemoryStore store, StoreView view, String key) {
        if (!(view instanceof MemoryView v) || v.store != store) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle does not belong to this store")
                    .store(store.uri()).operation("tryView").key(key)
                    .hint("get handles from the same store's newView()").build();
        }
        if (v.entry != null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle still holds an object")
                    .store(store.uri()).operation("tryView").key(key)
                    .hint("release() it before the next tryView").build();
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
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle holds no object").store(store.uri())
                    .operation("segment").hint("tryView must return a hit first; release empties the handle").build();
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
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the view handle holds no object: released twice?")
                    .store(store.uri()).operation("release")
                    .hint("release each hit of tryView once; close() is the idempotent form").build();
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
