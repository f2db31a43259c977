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
 *
 * <p>A view held while another process truncates the file: {@link #segment()} checks the file's size and fails with
 * {@code CORRUPT_OBJECT} naming the file once it no longer covers the value; {@link #release()} still gives the lease
 * back (or only empties the handle when the cut reached the store's tables). A segment taken before the cut and read
 * after it gets the JVM's {@link InternalError} for the lost pages, never freed memory.
 *
 * <p>The segment comes from the store's {@link SliceCache}, and the key is copied into the handle's own
 * {@link KeyScratch}, so viewing the same value again allocates nothing, under a new key too.
 */
final class ShmView implements StoreView {
    private final Object owner;
    private final String uri;
    private final CallGate gate;
    private final ShmReader reader;
    /** Offset of the lease record in the file, or -1 when the handle is empty. */
    private long leaseOffset = -1;
    /** The file offset just past the value: the file must be at least this long to read it. */
    private long end;
    /** The key viewed, for errors; refilled by each view. */
    private final KeyScratch key = new KeyScratch();
    private MemorySegment segment;

    /**
     * @param owner the store whose handle this is ({@link #ownedBy} compares it by identity)
     * @param uri the store's URI, masked, for errors
     */
    ShmView(Object owner, String uri, CallGate gate, ShmReader reader) {
        this.owner = owner;
        this.uri = uri;
        this.gate = gate;
        this.reader = reader;
    }

    /** {@code view} as a handle of {@code owner}'s, checked to be empty. */
    static ShmView ownedBy(Object owner, String uri, StoreView view, KeyScratch key) {
        if (!(view instanceof ShmView v) || v.owner != owner) {
            throw HandleErrors.foreignView(uri, key.text());
        }
        if (v.segment != null) {
            throw HandleErrors.viewStillHeld(uri, key.text());
        }
        return v;
    }

    /**
     * Takes over the lease record at {@code offset}, which names the entry of {@code viewedKey} (copied) whose value
     * {@code readOnly} is, ending at file offset {@code valueEnd}.
     */
    void hold(KeyScratch viewedKey, long offset, MemorySegment readOnly, long valueEnd) {
        this.key.copyFrom(viewedKey);
        this.leaseOffset = offset;
        this.segment = readOnly;
        this.end = valueEnd;
    }

    /** The value; CLOSED after the close, CORRUPT_OBJECT when the file no longer covers it (one {@code fstat}). */
    @Override
    public MemorySegment segment() {
        if (segment == null) {
            throw HandleErrors.noView(uri);
        }
        gate.requireCovers(end, "segment", key);
        return segment;
    }

    @Override
    public boolean isHeld() {
        return segment != null;
    }

    @Override
    public void release() {
        if (segment == null) {
            throw HandleErrors.releasedTwice(uri);
        }
        long offset = leaseOffset;
        leaseOffset = -1;
        segment = null;
        // After the close the lease is gone with the instance's slot, after a cut into the tables with the file:
        // only the handle is emptied.
        if (gate.tryEnter() != CallGate.REFUSED) {
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
