package dev.kvconnector.store.shm;

import dev.kvconnector.error.KVException;
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
 * reaches the writer, whose {@code finally} aborts the claim). So do stores past the end of a file that another
 * process truncated; {@link #segment()} and {@link #commit()} check the file's size first and fail with
 * {@code CORRUPT_OBJECT} naming it instead, and the commit then frees the claim.
 *
 * <p>The segment is a slice of the mapping from the store's {@link SliceCache}: claiming the same blocks again hands
 * out the same segment object, and the key is copied into the handle's own {@link KeyScratch}, so a steady stream of
 * claims allocates nothing, under new keys too.
 */
final class ShmClaim implements StoreClaim {
    private final Object owner;
    private final String uri;
    private final CallGate gate;
    private final ShmWriter writer;
    /**
     * The claimed key's bytes and hash, which the commit publishes the entry under (the thread's scratch holds other
     * keys by then); refilled by each claim, and kept after the handle empties until the next.
     */
    final KeyScratch key = new KeyScratch();
    /** The entry record, or -1 when the handle is empty. */
    int entry = -1;
    /** The entry's state word (generation and WRITING) at the claim: another word means a repair reclaimed it. */
    long stateWord;
    /** Expiry in epoch ms, or 0 for none. */
    long expiresMillis;
    boolean ifAbsent;
    /** The file offset just past the claimed bytes: the file must be at least this long to write or commit them. */
    long end;
    private MemorySegment segment;

    /**
     * @param owner the store whose handle this is ({@link #ownedBy} compares it by identity)
     * @param uri the store's URI, masked, for errors
     */
    ShmClaim(Object owner, String uri, CallGate gate, ShmWriter writer) {
        this.owner = owner;
        this.uri = uri;
        this.gate = gate;
        this.writer = writer;
    }

    /** {@code claim} as a handle of {@code owner}'s, checked to be empty. */
    static ShmClaim ownedBy(Object owner, String uri, StoreClaim claim, KeyScratch key) {
        if (!(claim instanceof ShmClaim c) || c.owner != owner) {
            throw HandleErrors.foreignClaim(uri, key.text());
        }
        if (c.segment != null) {
            throw HandleErrors.claimStillHeld(uri, c.key.text(), key.text());
        }
        return c;
    }

    /**
     * Takes over entry {@code claimEntry} of {@code claimKey} (copied), WRITING under {@code claimStateWord}, its bytes
     * {@code claimSegment}.
     */
    void hold(KeyScratch claimKey, int claimEntry, long claimStateWord, MemorySegment claimSegment, long claimEnd,
              long expires, boolean absent) {
        this.key.copyFrom(claimKey);
        this.entry = claimEntry;
        this.stateWord = claimStateWord;
        this.segment = claimSegment;
        this.end = claimEnd;
        this.expiresMillis = expires;
        this.ifAbsent = absent;
    }

    /** The claimed bytes; CORRUPT_OBJECT when the file no longer covers them (one {@code fstat}). */
    @Override
    public MemorySegment segment() {
        requireClaimed("segment");
        gate.requireCovers(end, "segment", key);
        return segment;
    }

    /** False after the store closed: the close freed the claim. */
    @Override
    public boolean isClaimed() {
        return segment != null && !gate.isClosed();
    }

    /**
     * Publishes the entry as a put would and empties the handle. If the store closed meanwhile, CLOSED; if the file
     * was truncated, CORRUPT_OBJECT (the claim is freed, or lost with the tables when the cut reached them).
     */
    @Override
    public boolean commit() {
        requireClaimed("commit");
        long fileSize;
        try {
            fileSize = gate.enter("commit", key);
        } catch (KVException closedOrCut) {
            clear();
            throw closedOrCut;
        }
        try {
            return writer.commit(this, fileSize);
        } finally {
            gate.exit();
        }
    }

    /**
     * Frees the entry unless a repair already did, and empties the handle; after the close, or a cut of the file into
     * the store's tables, only empties it.
     */
    @Override
    public void abort() {
        if (segment == null) {
            return;
        }
        if (gate.tryEnter() == CallGate.REFUSED) {
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
        entry = -1;
        segment = null;
    }

    private void requireClaimed(String op) {
        if (gate.isClosed()) {
            throw gate.closedError(op, segment == null ? null : key);
        }
        if (segment == null) {
            throw HandleErrors.noClaim(uri, op);
        }
    }
}
