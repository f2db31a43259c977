package dev.kvconnector.store.tiered;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreClaim} of a {@link TieredStore}: a claim in the first tier, so the writer fills the first tier's
 * memory in place. The commit brings the lower tiers along as a put would: write-through copies the claimed bytes
 * to them before the first tier publishes; write-back queues them after. Not thread-safe, like every claim.
 */
final class TieredClaim implements StoreClaim {
    private final TieredStore store;
    final StoreClaim first;
    String key;
    PutOptions options;
    boolean reserved;

    TieredClaim(TieredStore store, StoreClaim first) {
        this.store = store;
        this.first = first;
    }

    /** {@code claim} as a handle of {@code store}, checked to be empty. */
    static TieredClaim ownedBy(TieredStore store, StoreClaim claim, String key) {
        if (!(claim instanceof TieredClaim c) || c.store != store) {
            throw HandleErrors.foreignClaim(store.uri(), key);
        }
        if (c.first.isClaimed()) {
            throw HandleErrors.claimStillHeld(store.uri(), c.key, key);
        }
        return c;
    }

    @Override
    public MemorySegment segment() {
        store.checkOpen("segment", key);
        return first.segment();
    }

    @Override
    public boolean isClaimed() {
        return first.isClaimed();
    }

    @Override
    public boolean commit() {
        store.checkOpen("commit", key);
        if (!first.isClaimed()) {
            throw HandleErrors.noClaim(store.uri(), "commit");
        }
        return store.commit(this);
    }

    @Override
    public void abort() {
        first.abort();
        store.dropReservation(this);
    }
}
