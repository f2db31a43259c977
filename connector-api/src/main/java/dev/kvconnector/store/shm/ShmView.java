package dev.kvconnector.store.shm;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreView} of a {@link ShmStore}: holds the lease record that the read took in this process's slot of the
 * file (a hazard pointer naming the entry), so that no process's remove, replace or eviction frees or reuses the
 * entry's blocks until {@link #release()}. The segment is a read-only slice of the mapping over the value.
 *
 * <p>A process killed while it holds views leaves its leases in its slot; whoever next finds it dead clears them, as
 * it does for a reader killed mid-copy, and the entries they kept are freed then.
 */
final class ShmView implements StoreView {
    private final ShmStore store;
    private final CallGate gate;
    private final ShmReader reader;
    /** Offset of the lease record in the file, or -1 when the handle is empty. */
    private long leaseOffset = -1;
    private MemorySegment segment;

    ShmView(ShmStore store, CallGate gate, ShmReader reader) {
        this.store = store;
        this.gate = gate;
        this.reader = reader;
    }

    /** {@code view} as a handle of {@code store}, checked to be empty. */
    static ShmView ownedBy(ShmStore store, StoreView view, String key) {
        if (!(view instanceof ShmView v) || v.store != store) {
            throw HandleErrors.foreignView(store.uri(), key);
        }
        if (v.segment != null) {
            throw HandleErrors.viewStillHeld(store.uri(), key);
        }
        return v;
    }

    /** Takes over the lease record at {@code offset}, which names the entry under {@code readOnly}. */
    void hold(long offset, MemorySegment readOnly) {
        this.leaseOffset = offset;
        this.segment = readOnly;
    }

    @Override
    public MemorySegment segment() {
        if (segment == null) {
            throw HandleErrors.noView(store.uri());
        }
        if (gate.isClosed()) {
            throw gate.closedError("segment", null);
        }
        return segment;
    }

    @Override
    public boolean isHeld() {
        return segment != null;
    }

    @Override
    public void release() {
        if (segment == null) {
            throw HandleErrors.releasedTwice(store.uri());
        }
        long offset = leaseOffset;
        leaseOffset = -1;
        segment = null;
        // After the close the lease is gone with the instance's slot: only the handle is emptied.
        if (gate.enterIfOpen()) {
            try {
                reader.releaseView(offset);
            } finally {
                gate.exit();
            }
        }
    }

    @Override
    public void close() {
        if (segment != null) {
            release();
        }
    }
}
