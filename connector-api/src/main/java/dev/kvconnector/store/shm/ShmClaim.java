package dev.kvconnector.store.shm;

import dev.kvconnector.store.HandleErrors;
import dev.kvconnector.store.StoreClaim;
import java.lang.foreign.MemorySegment;

/**
 * {@link StoreClaim} of a {@link ShmStore}: an entry record in the file, in state WRITING under this process's
 * token, with its blocks allocated as a put's are before its copy. The segment handed out is a slice of the mapping
 * over those blocks, exactly the claimed size. The commit publishes the entry as a put does; the abort frees it.
 *
 * <p>A claim never committed is never visible, whatever happens to its writer: the store's close frees the open
 * claims of that instance, and when the process dies (kill -9) whoever next finds its token dead frees the entry, as
 * it frees an unfinished put. A handle dropped without commit or abort keeps its blocks until one of those.
 *
 * <p>The writer's stores into the segment are stores into a sparse tmpfs file: where the tmpfs has no page left they
 * fault, and the JVM throws {@link InternalError} from the write (a put turns that into {@code STORE_FULL}; here it
 * reaches the writer, whose {@code finally} aborts the claim).
 */
final class ShmClaim implements StoreClaim {
    private final ShmStore store;
    private final CallGate gate;
    private final ShmWriter writer;
    /** The key, re-encoded at the commit (the encoding scratch belongs to the thread, not the handle). */
    String key;
    /** The entry record, or -1 when the handle is empty. */
    int entry = -1;
    /** The entry's state word (generation and WRITING) at the claim: another word means a repair reclaimed it. */
    long stateWord;
    /** Expiry in epoch ms, or 0 for none. */
    long expiresMillis;
    boolean ifAbsent;
    private MemorySegment segment;

    ShmClaim(ShmStore store, CallGate gate, ShmWriter writer) {
        this.store = store;
        this.gate = gate;
        this.writer = writer;
    }

    /** {@code claim} as a handle of {@code store}, checked to be empty. */
    static ShmClaim ownedBy(ShmStore store, StoreClaim claim, String key) {
        if (!(claim instanceof ShmClaim c) || c.store != store) {
            throw HandleErrors.foreignClaim(store.uri(), key);
        }
        if (c.segment != null) {
            throw HandleErrors.claimStillHeld(store.uri(), c.key, key);
        }
        return c;
    }

    void hold(String claimKey, int claimEntry, long claimStateWord, MemorySegment claimSegment, long expires,
              boolean absent) {
        this.key = claimKey;
        this.entry = claimEntry;
        this.stateWord = claimStateWord;
        this.segment = claimSegment;
        this.expiresMillis = expires;
        this.ifAbsent = absent;
    }

    @Override
    public MemorySegment segment() {
        requireClaimed("segment");
        return segment;
    }

    /** False after the store closed: the close freed the claim. */
    @Override
    public boolean isClaimed() {
        return segment != null && !gate.isClosed();
    }

    /** Publishes the entry as a put would and empties the handle; if the store closed meanwhile, CLOSED. */
    @Override
    public boolean commit() {
        requireClaimed("commit");
        if (!gate.enterIfOpen()) {
            String claimed = key;
            clear();
            throw gate.closedError("commit", claimed);
        }
        try {
            return writer.commit(this);
        } finally {
            gate.exit();
        }
    }

    /** Frees the entry unless a repair already did, and empties the handle; after the close, only empties it. */
    @Override
    public void abort() {
        if (segment == null) {
            return;
        }
        if (!gate.enterIfOpen()) {
            clear();
            return;
        }
        try {
            writer.abort(this);
        } finally {
            gate.exit();
        }
    }

    /** Empties the handle. */
    void clear() {
        key = null;
        entry = -1;
        segment = null;
    }

    private void requireClaimed(String op) {
        if (gate.isClosed()) {
            throw gate.closedError(op, key);
        }
        if (segment == null) {
            throw HandleErrors.noClaim(store.uri(), op);
        }
    }
}
