package dev.kvconnector.store.memory;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreClaim} of a {@link MemoryStore}: an entry and its block, reserved against the store's capacity from the
 * claim on. The commit publishes the entry as a put does; the abort (or the store's close) returns it. The segment
 * handed out is the entry's data slice of its block, exactly the claimed size. The handle keeps a copy of the claimed
 * key in a key of its own, refilled claim after claim, so that a claim and its commit allocate nothing.
 */
final class MemoryClaim implements StoreClaim {
    private final MemoryStore store;
    /** The key of the handle's last claim, kept until its next: the commit publishes under it after emptying it. */
    private final StoreKey key = new StoreKey();
    private MemoryStore.Entry entry;
    private boolean ifAbsent;

    MemoryClaim(MemoryStore store) {
        this.store = store;
    }

    /** {@code claim} as a handle of {@code store}, checked to be empty. */
    static MemoryClaim ownedBy(MemoryStore store, StoreClaim claim, StoreKey key) {
        if (!(claim instanceof MemoryClaim c) || c.store != store) {
            throw HandleErrors.foreignClaim(store.uri(), key.toString());
        }
        if (c.entry != null) {
            throw HandleErrors.claimStillHeld(store.uri(), c.key.toString(), key.toString());
        }
        return c;
    }

    /** Holds {@code entry}, prepared for the claimed size with the claim's one reference, under a copy of the key. */
    void hold(StoreKey claimKey, MemoryStore.Entry entry, boolean absent) {
        key.set(claimKey);
        this.entry = entry;
        this.ifAbsent = absent;
    }

    /** Empties the handle for the store's close and returns the entry, for the store to free. */
    MemoryStore.Entry dropAtClose() {
        MemoryStore.Entry b = entry;
        clear();
        return b;
    }

    @Override
    public MemorySegment segment() {
        requireClaimed("segment");
        return entry.data;
    }

    @Override
    public boolean isClaimed() {
        return entry != null;
    }

    @Override
    public boolean commit() {
        requireClaimed("commit");
        MemoryStore.Entry b = entry;
        boolean absent = ifAbsent;
        if (!store.closeClaim(this)) {
            clear();
            throw store.closedError("commit", key);
        }
        clear();
        return store.publish(key, b, absent, "commit");
    }

    @Override
    public void abort() {
        if (entry != null && store.closeClaim(this)) {
            MemoryStore.Entry b = entry;
            clear();
            store.releaseBlock(b);
        } else {
            clear();
        }
    }

    private void requireClaimed(String op) {
        if (entry == null) {
            if (store.isClosed()) {
                throw store.closedError(op, null);
            }
            throw HandleErrors.noClaim(store.uri(), op);
        }
    }

    private void clear() {
        entry = null;
    }
}
