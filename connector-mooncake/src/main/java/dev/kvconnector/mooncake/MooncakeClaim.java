package dev.kvconnector.mooncake;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreClaim} of a {@link MooncakeStore}: one registered staging slot, lent from the claim on. The caller
 * writes the value into it in place; the commit {@code put_from}s the slot (a put whose value is already in
 * registered memory) and returns it, the abort returns it unwritten. Nothing reaches Mooncake before the commit.
 */
final class MooncakeClaim implements StoreClaim {
    private final MooncakeStore store;
    private String key;
    private MemorySegment slot;
    private MemorySegment value;
    private PutOptions options;

    MooncakeClaim(MooncakeStore store) {
        this.store = store;
    }

    /** {@code claim} as a handle of {@code store}, checked to be empty. */
    static MooncakeClaim ownedBy(MooncakeStore store, StoreClaim claim, String key) {
        if (!(claim instanceof MooncakeClaim c) || c.store != store) {
            throw HandleErrors.foreignClaim(store.uri(), key);
        }
        if (c.slot != null) {
            throw HandleErrors.claimStillHeld(store.uri(), c.key, key);
        }
        return c;
    }

    /** Holds {@code slot}, of which the first {@code bytes} bytes are the value. */
    void hold(String claimKey, MemorySegment heldSlot, long bytes, PutOptions putOptions) {
        this.key = claimKey;
        this.slot = heldSlot;
        this.value = heldSlot.asSlice(0, bytes);
        this.options = putOptions;
    }

    @Override
    public MemorySegment segment() {
        requireClaimed("segment");
        store.checkOpen("segment");
        return value;
    }

    @Override
    public boolean isClaimed() {
        return slot != null;
    }

    @Override
    public boolean commit() {
        requireClaimed("commit");
        String k = key;
        MemorySegment s = slot;
        MemorySegment v = value;
        PutOptions o = options;
        clear();
        try {
            return store.commitClaim(k, v, s, o);
        } finally {
            store.returnSlot(s);
        }
    }

    @Override
    public void abort() {
        if (slot != null) {
            MemorySegment s = slot;
            clear();
            store.returnSlot(s);
        }
    }

    private void requireClaimed(String op) {
        if (slot == null) {
            store.checkOpen(op);
            throw HandleErrors.noClaim(store.uri(), op);
        }
    }

    private void clear() {
        key = null;
        slot = null;
        value = null;
        options = null;
    }
}
