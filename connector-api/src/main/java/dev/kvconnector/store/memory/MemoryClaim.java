package dev.kvconnector.store.memory;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreClaim;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreClaim} of a {@link MemoryStore}: a block reserved against the store's capacity from the claim on. The
 * commit wraps the block in an entry and publishes it as a put does; the abort (or the store's close) returns it.
 * The segment handed out is a slice of the block, exactly the claimed size.
 */
final class MemoryClaim implements StoreClaim {
    private final MemoryStore store;
    private String key;
    private MemoryStore.Entry block;
    private boolean ifAbsent;

    MemoryClaim(MemoryStore store) {
        this.store = store;
    }

    /** {@code claim} as a handle of {@code store}, checked to be empty. */
    static MemoryClaim ownedBy(MemoryStore store, StoreClaim claim, String key) {
        if (!(claim instanceof MemoryClaim c) || c.store != store) {
            throw HandleErrors.foreignClaim(store.uri(), key);
        }
        if (c.block != null) {
            throw HandleErrors.claimStillHeld(store.uri(), c.key, key);
        }
        return c;
    }

    /** Holds {@code entry}, prepared for the claimed size with the claim's one reference. */
    void hold(String claimKey, MemoryStore.Entry entry, boolean absent) {
        this.key = claimKey;
        this.block = entry;
        this.ifAbsent = absent;
    }

    /** Empties the handle for the store's close and returns the block, for the store to free. */
    MemoryStore.Entry dropAtClose() {
        MemoryStore.Entry b = block;
        clear();
        return b;
    }

    @Override
    public MemorySegment segment() {
        requireClaimed("segment");
        return block.data;
    }

    @Override
    public boolean isClaimed() {
        return block != null;
    }

    @Override
    public boolean commit() {
        requireClaimed("commit");
        String k = key;
        MemoryStore.Entry b = block;
        boolean absent = ifAbsent;
        if (!store.closeClaim(this)) {
            clear();
            throw store.closedError("commit", k);
        }
        clear();
        return store.publish(k, b, absent, "commit");
    }

    @Override
    public void abort() {
        if (block != null && store.closeClaim(this)) {
            MemoryStore.Entry b = block;
            clear();
            store.releaseBlock(b);
        } else {
            clear();
        }
    }

    private void requireClaimed(String op) {
        if (block == null) {
            if (store.isClosed()) {
                throw store.closedError(op, null);
            }
            throw HandleErrors.noClaim(store.uri(), op);
        }
    }

    private void clear() {
        key = null;
        block = null;
    }
}
