package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.COMMITTED;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store's writes. A put takes an entry and its blocks under the lock (state WRITING, invisible), copies the
 * value outside the lock, then, under the lock again, swaps the entry into the index; a claim is a put whose copy
 * the caller makes into the mapping, between the same two steps. Removal and replacement unindex first and retire
 * the old entry, which is freed once no lease names it. Each change is told to the event ring under the same lock.
 *
 * <p>A file that another process truncated takes no new value: puts, claims and commits given a file size short of
 * the mapping fail with {@code CORRUPT_OBJECT} naming the file, and free what they took. Removal still works (it
 * touches only the tables, which the caller's gate has checked are whole).
 */
final class ShmWriter {
    private static final Logger LOG = LoggerFactory.getLogger(ShmWriter.class);

    private final ShmFile file;
    private final MemorySegment map;
    private final ShmLayout lay;
    private final EntryTable entries;
    private final ShmIndex index;
    private final LeaseTable leases;
    private final ShmLock lock;
    private final ShmSpace space;
    private final EventRing events;
    private final ShmReader reader;
    private final SliceCache claimSlices;
    private final String uri;
    private final boolean evictLive;
    private final long defaultTtlMillis;
    /** Claims of this instance neither committed nor aborted, freed by the close; guarded by itself. */
    private final Set<ShmClaim> openClaims = Collections.newSetFromMap(new IdentityHashMap<>());

    ShmWriter(ShmFile file, ShmParts parts, ShmReader reader, ShmOptions options) {
        this.file = file;
        this.map = file.map();
        this.lay = file.layout();
        this.entries = parts.entries;
        this.index = parts.index;
        this.leases = parts.leases;
        this.lock = parts.lock;
        this.space = parts.space;
        this.events = parts.events;
        this.reader = reader;
        this.claimSlices = new SliceCache(map, lay.entryCount());
        this.uri = options.uri();
        this.evictLive = options.evictLive();
        this.defaultTtlMillis = options.ttlMillis();
    }

    /**
     * Puts {@code value}; false when {@link PutOptions#ifAbsent()} found the key.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter})
     */
    boolean put(KeyScratch k, MemorySegment value, PutOptions options, long fileSize) {
        if (value == null || options == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "value and options must not be null").store(uri)
                    .operation("put").key(k.text()).build();
        }
        long len = value.byteSize();
        checkFits(len, "put", k);
        requireWhole(fileSize, "put", k);
        boolean ifAbsent = options.ifAbsent();
        if (ifAbsent && reader.contains(k)) {
            return false;
        }
        long now = System.currentTimeMillis();
        long expires = expiresAt(options, now);
        long blocks = blocksFor(len);
        int e;
        long mine;
        lock.lock();
        try {
            e = space.allocate(k, blocks, len, now);
            if (e < 0) {
                throw storeFull(e, blocks, "put", k);
            }
            mine = entries.stateWord(e);
        } finally {
            lock.unlock();
        }
        copyIn(e, mine, value, len, k);
        lock.lock();
        return publishLocked(e, mine, k, expires, ifAbsent, now, ShmTestHooks.LOCK_PAUSE_MS, "put");
    }

    /** Copies a put's value into its entry's blocks; on a failure frees the entry and throws. */
    private void copyIn(int e, long mine, MemorySegment value, long len, KeyScratch key) {
        boolean copied = false;
        try {
            long dst = reader.payload(e, "put", key);
            if (ShmTestHooks.PUT_PAUSE_MS > 0) {
                long half = len / 2;
                MemorySegment.copy(value, 0, map, dst, half);
                ShmTestHooks.pause(ShmTestHooks.PUT_PAUSE_MS);
                MemorySegment.copy(value, half, map, dst + half, len - half);
            } else {
                MemorySegment.copy(value, 0, map, dst, len);
            }
            file.size().recheck(dst + len, len, "put", key);
            copied = true;
        } catch (InternalError fault) {
            KVException truncated = file.size().truncated(fault, "put", key);
            if (truncated != null) {
                throw truncated;
            }
            // A write to a sparse tmpfs file faults (SIGBUS) when the tmpfs has no page left.
            throw KVException.of(ErrorCode.STORE_FULL, "the file system of " + file.path() + " has no room for a "
                    + len + "-byte value: " + fault.getMessage()).store(uri).operation("put").key(key.text())
                    .cause(fault).hint("grow the tmpfs (mount -o remount,size=... " + file.path().getParent()
                            + ") to hold the capacity of every store in it, or lower capacity=").build();
        } finally {
            if (!copied) {
                freeOwned(e, mine);
            }
        }
    }

    /**
     * Allocates the entry and blocks for {@code bytes} bytes as a put does and hands {@code c} a slice of the
     * mapping over them and a copy of the key, for its commit; {@link ClaimResult#EXISTS} or {@link ClaimResult#FULL}
     * where a put would return false or fail with STORE_FULL.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter})
     */
    int claim(KeyScratch k, long bytes, PutOptions options, ShmClaim c, long fileSize) {
        if (options == null || bytes < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot claim " + bytes + " bytes with options "
                    + options).store(uri).operation("tryClaim").key(k.text()).build();
        }
        checkFits(bytes, "tryClaim", k);
        requireWhole(fileSize, "tryClaim", k);
        if (options.ifAbsent() && reader.contains(k)) {
            return ClaimResult.EXISTS;
        }
        long now = System.currentTimeMillis();
        int e;
        long mine;
        long dst;
        lock.lock();
        try {
            e = space.allocate(k, blocksFor(bytes), bytes, now);
            if (e < 0) {
                return ClaimResult.FULL;
            }
            mine = entries.stateWord(e);
            dst = lay.payloadOffset() + entries.payloadOffset(e);
        } finally {
            lock.unlock();
        }
        c.hold(k, e, mine, claimSlices.slice(dst, bytes), dst + bytes, expiresAt(options, now), options.ifAbsent());
        synchronized (openClaims) {
            openClaims.add(c);
        }
        return ClaimResult.CLAIMED;
    }

    /**
     * Publishes a claim's entry as a put publishes its own, and empties the handle; a file cut short of the mapping
     * since the claim frees it instead, and fails.
     *
     * @param fileSize the file's size in bytes as the call entered ({@link CallGate#enter})
     */
    boolean commit(ShmClaim c, long fileSize) {
        if (fileSize < lay.fileSize()) {
            abort(c);
            requireWhole(fileSize, "commit", c.key);
        }
        // A TIMEOUT here leaves the handle its claim, for an abort or the close to free.
        lock.lock();
        try {
            return publishLocked(c.entry, c.stateWord, c.key, c.expiresMillis, c.ifAbsent, System.currentTimeMillis(),
                    0, "commit");
        } finally {
            forget(c);
        }
    }

    /** Frees a claim's entry unless a repair already did, and empties the handle. */
    void abort(ShmClaim c) {
        freeOwned(c.entry, c.stateWord);
        forget(c);
    }

    private ShmClaim[] takeOpenClaims() {
        synchronized (openClaims) {
            ShmClaim[] claims = openClaims.toArray(new ShmClaim[0]);
            openClaims.clear();
            return claims;
        }
    }

    private void forget(ShmClaim c) {
        synchronized (openClaims) {
            openClaims.remove(c);
        }
        c.clear();
    }

    /** Unindexes and retires the key's entry; whether it held a live (unexpired) value. */
    boolean remove(KeyScratch k) {
        lock.lock();
        try {
            long slot = index.find(k);
            if (slot < 0) {
                return false;
            }
            int e = index.entryAt(slot);
            boolean live = !entries.expired(e, System.currentTimeMillis());
            index.remove(e);
            events.transmit(live ? ShmLayout.EVENT_REMOVED : ShmLayout.EVENT_EXPIRED, e);
            space.retire(e);
            return live;
        } finally {
            lock.unlock();
        }
    }

    /** Reaps what dead processes left: what a store does as it opens. */
    void reclaimDead() {
        lock.lock();
        try {
            space.recovery().reap();
        } finally {
            lock.unlock();
        }
    }

    /** Reaps what dead processes left and retires every expired entry. */
    void reclaim() {
        lock.lock();
        try {
            space.recovery().reap();
            long now = System.currentTimeMillis();
            int mark = entries.watermark();
            for (int e = 0; e < mark; e++) {
                if (entries.state(e) == COMMITTED && entries.expired(e, now)) {
                    index.remove(e);
                    events.transmit(ShmLayout.EVENT_EXPIRED, e);
                    space.retire(e);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * At the close: frees the entries of this instance's open claims, clears the lease records of its views in slot
     * {@code procSlot} and frees the retired entries they kept. Without the lock (held by a stuck process) those
     * entries stay allocated until this process exits and another one reaps them.
     */
    void freeAtClose(int procSlot) {
        ShmClaim[] claims = takeOpenClaims();
        long[] leased = new long[ShmLayout.LEASES_PER_PROC];
        int views = leases.clearAll(procSlot, leased);
        if (claims.length == 0 && views == 0) {
            return;
        }
        try {
            lock.lock();
        } catch (KVException e) {
            LOG.warn("closing {}: {} open claims and {} views stay allocated until this process exits: {}", uri,
                    claims.length, views, e.getMessage());
            return;
        }
        try {
            for (ShmClaim c : claims) {
                if (entries.stateWord(c.entry) == c.stateWord) {
                    space.free(c.entry);
                }
            }
            for (int i = 0; i < views; i++) {
                space.freeIfUnleased((int) Math.clamp(leased[i], 0, lay.entryCount() - 1));
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Publishes entry {@code e}, which this writer took with state word {@code mine}; frees it when that fails, and
     * throws STORE_ERROR when a repair reclaimed it meanwhile. Called holding the lock, which it releases.
     */
    private boolean publishLocked(int e, long mine, KeyScratch k, long expires, boolean ifAbsent, long now,
                                  long pauseMillis, String op) {
        try {
            if (pauseMillis > 0) {
                ShmTestHooks.pause(pauseMillis);
            }
            if (entries.stateWord(e) != mine) {
                throw KVException.of(ErrorCode.STORE_ERROR, "entry " + e + " was reclaimed by a repair of "
                        + file.path() + (op.equals("put") ? " while this put copied its value"
                        : " while the claim was open") + "; the value was dropped").store(uri).operation(op)
                        .key(k.text()).hint("retry the put; look for another process that changed the file, or a pid "
                                + "namespace it does not share").build();
            }
            return publish(e, k, expires, ifAbsent, now);
        } catch (RuntimeException ex) {
            if (entries.stateWord(e) == mine) {
                space.free(e);
            }
            throw ex;
        } finally {
            lock.unlock();
        }
    }

    /** Swaps a WRITING entry into the index in place of the key's old one, which it retires; under the lock. */
    private boolean publish(int e, KeyScratch k, long expires, boolean ifAbsent, long now) {
        long slot = index.find(k);
        int old = slot >= 0 ? index.entryAt(slot) : -1;
        if (old >= 0 && ifAbsent && !entries.expired(old, now)) {
            space.retire(e);
            return false;
        }
        if (old < 0) {
            index.makeRoom();
        }
        entries.commit(e, expires, entries.nextCommitSeq());
        if (old >= 0) {
            index.replace(slot, k, e);
            space.retire(old);
        } else {
            index.add(k, e);
        }
        events.transmit(ShmLayout.EVENT_STORED, e);
        return true;
    }

    /** Frees entry {@code e} under the lock unless its state word is no longer {@code mine} (a repair freed it). */
    private void freeOwned(int e, long mine) {
        lock.lock();
        try {
            if (entries.stateWord(e) == mine) {
                space.free(e);
            }
        } finally {
            lock.unlock();
        }
    }

    /** Refuses to store into a file that is shorter than the mapping: another process cut it. */
    private void requireWhole(long fileSize, String op, KeyScratch key) {
        file.size().requireCovers(fileSize, lay.fileSize(), op, key);
    }

    /** Refuses a value of {@code bytes} that no eviction could make room for. */
    private void checkFits(long bytes, String op, KeyScratch key) {
        if (bytes > lay.capacity()) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "a value of " + bytes + " bytes exceeds the capacity of "
                    + lay.capacity() + " bytes").store(uri).operation(op).key(key.text())
                    .hint("raise capacity= (delete the store file first) or split the value").build();
        }
    }

    /** Epoch ms at which a value put {@code now} with {@code options} expires, or 0 for never. */
    private long expiresAt(PutOptions options, long now) {
        long ttl = options.ttlMillis() > 0 ? options.ttlMillis() : defaultTtlMillis;
        return ttl > 0 ? now + ttl : 0;
    }

    private long blocksFor(long bytes) {
        return (bytes + lay.blockSize() - 1) / lay.blockSize();
    }

    /** The STORE_FULL error for {@link ShmSpace#allocate}'s answer {@code why}. */
    private KVException storeFull(int why, long blocks, String op, KeyScratch key) {
        return KVException.of(ErrorCode.STORE_FULL, (why == ShmSpace.NO_ENTRY ? "all " + lay.entryCount()
                + " entries are in use" : "no run of " + blocks + " free blocks of " + lay.blockSize() + " bytes")
                + (evictLive ? " and nothing can be evicted: every entry is being written or read"
                : " and eviction=refuse is set")).store(uri).operation(op).key(key.text())
                .hint(evictLive ? "retry; or raise capacity= / entries= (delete the store file first)"
                        : "remove entries, or raise capacity= / entries= (delete the store file first)").build();
    }
}
