package dev.kvconnector.store.tiered;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.memory.SegmentPool;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A store over an ordered list of stores, fastest first: {@code tiered:[shm:/kv?capacity=8GiB][valkey://h:6379]}.
 * This file is the facade; the lower tiers' queue (write-back and removal retries) is {@link WriteBack}, the events
 * {@link TieredEvents}, the handles {@link TieredClaim} and {@link TieredView}, and the options
 * {@link TieredOptions}. Over 400 lines because each KVStore operation has its own per-tier rule, stated here.
 *
 * <ul>
 *   <li><b>Writes.</b> Write-through puts into every tier in order and acknowledges once every tier holds the value
 *       (its answer is the first tier's); a tier that fails fails the put with an error that names the tier and the
 *       write mode, and the tiers above it keep the value (a reader of this store sees it). Write-back puts into the
 *       first tier and queues the others (see {@link WriteBack}).</li>
 *   <li><b>Reads</b> go top-down. A hit in a lower tier is copied into the tiers above (promotion, unless
 *       {@code promote=never}), under their own default TTL. A tier that throws is counted and reported to the error
 *       handler, and the read goes on to the tiers below: it never fails while a tier serves it. A read that no tier
 *       serves answers what the lowest tier answered: a miss, or that tier's error, naming it (a lower tier that is
 *       down fails reads of what only it could serve; the errors of the tiers above it are then only counted and
 *       reported).</li>
 *   <li><b>Removes</b> (and consuming drop-selects) remove from every tier and cancel a waiting write-back; objects
 *       a reader consumed ({@link #removeConsumed}) leave the lower tiers from the write-back queue where it has
 *       room, so the reader does not wait for a remote's deletes. A lower
 *       tier that fails is counted and reported, and the removal is retried from the queue until that tier takes it;
 *       meanwhile this store reads the key from no lower tier, while a reader of that tier alone (another host,
 *       another process opening only it) may still read the object. Only a failure of the first tier fails the call.
 *       Eviction or expiry in one tier leaves the others alone.</li>
 *   <li><b>Zero copy.</b> Claims and views are the first tier's, where it has them: a claim fills the first tier
 *       in place, and a view of an object in the first tier reads it in place. A view of an object found lower
 *       holds a pooled copy.</li>
 *   <li><b>During a write-back</b>, a reader of this store sees the first tier's value; a reader of a lower tier
 *       alone sees its previous value or a miss until the write-back lands; {@link #flush} waits for it.</li>
 *   <li><b>Events</b> ({@link StoreCapability#EVENTS}, when any tier tells them): what is stored and removed through
 *       this store, naming it; each tier's own, naming the tier; and a removal from the store as a whole once no
 *       tier holds an object that left a tier otherwise (see {@link TieredEvents}).</li>
 * </ul>
 *
 * <p>Thread-safe. Steady-state reads and write-through puts allocate nothing beyond what the tiers allocate; a
 * write-back reuses its queue entries.
 */
public final class TieredStore implements KVStore {
    private final String uri;
    private final KVStore[] tiers;
    private final TierStats[] stats;
    private final TieredOptions options;
    private final Set<StoreCapability> capabilities;
    private final SegmentPool buffers;
    /** The size of the last object a view read from a tier below the first, in bytes: the next view's first guess. */
    private volatile long lowerObjectBytes = 64 * 1024;
    /** The lower tiers' queue: write-backs (write-back mode) and removal retries; null with a single tier. */
    private final WriteBack writeBack;
    private final boolean backMode;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Open event subscriptions; copy-on-write, so that a put or remove with none costs one array read. */
    private final List<TieredEvents> subscriptions = new CopyOnWriteArrayList<>();
    private volatile ErrorHandler errors = ErrorHandler.LOGGING;

    private TieredStore(String uri, List<KVStore> tiers, TieredOptions options) {
        this.uri = uri;
        this.tiers = tiers.toArray(new KVStore[0]);
        this.options = options;
        this.stats = new TierStats[this.tiers.length];
        for (int i = 0; i < stats.length; i++) {
            stats[i] = new TierStats(this.tiers[i].uri());
        }
        this.capabilities = TierList.capabilities(uri, this.tiers);
        this.buffers = new SegmentPool(options.bufferBytes());
        this.backMode = options.writeBack() && this.tiers.length > 1;
        this.writeBack = this.tiers.length > 1
                ? new WriteBack(uri, this.tiers, stats, options, buffers, () -> errors) : null;
    }

    /**
     * Opens the tiers that {@code uri} lists, in order, and the tiered store over them.
     *
     * @throws KVException {@code INVALID_URI} for an empty tier list, a tier named twice, a {@code tiered:} tier,
     *     or tiers of which only some can remove; the error of a tier that cannot open, naming it
     */
    public static TieredStore open(StoreUri uri) {
        TieredOptions options = TieredOptions.of(uri);
        List<KVStore> opened = TierList.open(uri);
        try {
            return new TieredStore(uri.masked(), opened, options);
        } catch (RuntimeException e) {
            TierList.closeAll(opened, e);
            throw e;
        }
    }

    /**
     * A tiered store over {@code tiers}, fastest first, which it owns from now on: {@link #close()} closes them (and
     * so does a failure here).
     */
    public static TieredStore over(List<KVStore> tiers, TieredOptions options) {
        StringBuilder name = new StringBuilder("tiered:");
        for (KVStore t : tiers) {
            name.append('[').append(t.uri()).append(']');
        }
        try {
            if (tiers.isEmpty()) {
                throw TierList.invalid(name.toString(), "a tiered: store needs at least one tier", null);
            }
            return new TieredStore(name.toString(), tiers, options);
        } catch (RuntimeException e) {
            TierList.closeAll(tiers, e);
            throw e;
        }
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return capabilities;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions putOptions) {
        checkOpen("put", key);
        if (!backMode) {
            boolean stored = putInto(0, key, value, putOptions);
            for (int i = 1; i < tiers.length; i++) {
                putInto(i, key, value, putOptions);
            }
            if (writeBack != null) {
                writeBack.supersede(key, putOptions);
            }
            if (stored) {
                tell(StoreEvent.Type.STORED, key, value.byteSize());
            }
            return stored;
        }
        if (!writeBack.reserve()) {
            throw KVException.of(ErrorCode.STORE_FULL, "the write-back queue is full (" + options.queueCapacity()
                            + " objects wait for the lower tiers)").store(uri).operation("put").key(key)
                    .hint("a lower tier is slow or down (" + writeBack.snapshot().lastFailure()
                            + "); raise write-back-queue, or set write-back-overflow=drop-oldest").build();
        }
        boolean stored = false;
        try {
            stored = putInto(0, key, value, putOptions);
        } finally {
            if (stored) {
                writeBack.offer(key, putOptions);
            } else {
                writeBack.unreserve();
            }
        }
        if (stored) {
            tell(StoreEvent.Type.STORED, key, value.byteSize());
        }
        return stored;
    }

    private boolean putInto(int tier, String key, MemorySegment value, PutOptions putOptions) {
        try {
            boolean stored = tiers[tier].put(key, value, putOptions);
            stats[tier].written(stored ? value.byteSize() : 0);
            return stored;
        } catch (KVException e) {
            stats[tier].error();
            throw tier == 0 ? tierFailed(0, "put", key, e) : KVException.of(e.code(), "tier " + (tier + 1) + " of "
                    + tiers.length + " (" + tiers[tier].uri() + ") failed the write-through put: " + e.getMessage()
                    + "; tiers 1 to " + tier + " hold the value, this store's readers see it")
                    .store(uri).operation("put").key(key).cause(e)
                    .hint((e.hint() == null ? "" : e.hint() + "; ") + "write=through acknowledges a put once every "
                            + "tier holds it: retry once the tier is back, or use write=back, which acknowledges once "
                            + "the first tier holds it and retries the others").build();
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        checkOpen("getInto", key);
        KVException lowest = null;
        for (int i = 0; i < tiers.length && (i == 0 || !removedBelow(key)); i++) {
            long r;
            try {
                r = tiers[i].getInto(key, dst);
            } catch (KVException e) {
                lowest = absorb(i, "getInto", key, e, lowest);
                continue;
            }
            report(lowest);
            lowest = null;
            if (GetResult.isMiss(r)) {
                continue;
            }
            if (GetResult.isHit(r)) {
                stats[i].hit(r);
                promote(key, dst, r, i);
            }
            return r;
        }
        return missOrThrow(lowest);
    }

    /**
     * Reads the batch tier by tier, each tier in one batch of what the tiers above did not serve, so that a request
     * served by a lower tier costs that tier's own batch read (one round trip for a network store), not a read per
     * object. Answers, promotion, counters and failures are as for {@link #getInto} key by key.
     */
    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        checkOpen("getIntoBatch", count > 0 ? keys[0] : null);
        int[] pending = new int[count];
        String[] tierKeys = new String[count];
        MemorySegment[] tierDsts = new MemorySegment[count];
        long[] tierResults = new long[count];
        int n = 0;
        for (int i = 0; i < count; i++) {
            pending[n++] = i;
        }
        KVException lowest = null;
        for (int t = 0; t < tiers.length && n > 0; t++) {
            int asked = 0;
            for (int j = 0; j < n; j++) {
                int i = pending[j];
                if (t > 0 && removedBelow(keys[i])) {
                    results[i] = GetResult.MISS;
                    continue;
                }
                pending[asked] = i;
                tierKeys[asked] = keys[i];
                tierDsts[asked] = dsts[i];
                asked++;
            }
            n = asked;
            if (n == 0) {
                break;
            }
            try {
                tiers[t].getIntoBatch(tierKeys, tierDsts, n, tierResults);
            } catch (KVException e) {
                lowest = absorb(t, "getIntoBatch", tierKeys[0], e, lowest);
                continue;
            }
            report(lowest);
            lowest = null;
            int missed = 0;
            for (int j = 0; j < n; j++) {
                int i = pending[j];
                long r = tierResults[j];
                if (GetResult.isMiss(r)) {
                    pending[missed++] = i;
                    continue;
                }
                results[i] = r;
                if (GetResult.isHit(r)) {
                    stats[t].hit(r);
                    promote(keys[i], dsts[i], r, t);
                }
            }
            n = missed;
        }
        for (int j = 0; j < n; j++) {
            results[pending[j]] = GetResult.MISS;
        }
        if (n > 0) {
            missOrThrow(lowest);
        }
    }

    /** Whether a removal of {@code key} is still to reach a lower tier: the lower tiers must not serve it. */
    private boolean removedBelow(String key) {
        return writeBack != null && writeBack.removing(key);
    }

    /**
     * Counts tier {@code tier}'s failure and returns it, naming the tier, as the answer so far; the answer it
     * replaces (a tier above that failed too) goes to the error handler, since a lower tier answers instead.
     */
    private KVException absorb(int tier, String op, String key, KVException e, KVException above) {
        stats[tier].error();
        report(above);
        return tierFailed(tier, op, key, e);
    }

    /** The end of a read no tier served: the lowest tier's error, or a miss. */
    private long missOrThrow(KVException lowest) {
        if (lowest != null) {
            throw lowest;
        }
        return GetResult.MISS;
    }

    private void report(KVException absorbed) {
        if (absorbed != null) {
            try {
                errors.onError(uri + " (absorbed: a tier below answered)", absorbed);
            } catch (RuntimeException ignored) {
                // The handler is for monitoring; the read has its answer.
            }
        }
    }

    /** Copies an object that tier {@code from} served into the tiers above it; a failure there fails no read. */
    private void promote(String key, MemorySegment value, long bytes, int from) {
        if (from == 0 || !options.promoteOnHit()) {
            return;
        }
        MemorySegment object = value.asSlice(0, bytes);
        for (int j = 0; j < from; j++) {
            try {
                tiers[j].put(key, object, PutOptions.DEFAULT);
                stats[j].promoted(bytes);
            } catch (KVException e) {
                stats[j].error();
            }
        }
    }

    @Override
    public long size(String key) {
        checkOpen("size", key);
        KVException lowest = null;
        for (int i = 0; i < tiers.length && (i == 0 || !removedBelow(key)); i++) {
            try {
                long size = tiers[i].size(key);
                if (size >= 0) {
                    report(lowest);
                    return size;
                }
                report(lowest);
                lowest = null;
            } catch (KVException e) {
                lowest = absorb(i, "size", key, e, lowest);
            }
        }
        if (lowest != null) {
            throw lowest;
        }
        return -1;
    }

    @Override
    public boolean remove(String key) {
        checkOpen("remove", key);
        requireRemove("remove", key);
        // A copy below whose removal is still pending was already gone for this store's readers.
        boolean goneBelow = removedBelow(key);
        if (writeBack != null) {
            writeBack.cancel(key);
        }
        boolean existed = false;
        KVException first = null;
        for (int i = 0; i < tiers.length; i++) {
            try {
                boolean removed = tiers[i].remove(key);
                existed |= removed && (i == 0 || !goneBelow);
            } catch (KVException e) {
                stats[i].error();
                if (i == 0) {
                    first = tierFailed(0, "remove", key, e);
                } else {
                    writeBack.retryRemoval(key, 1 << i, tierFailed(i, "remove", key, e));
                }
            }
        }
        if (first != null) {
            throw first;
        }
        if (existed) {
            tell(StoreEvent.Type.REMOVED, key, -1);
        }
        return existed;
    }

    @Override
    public int removeBatch(String[] keys, int count) {
        return removeEverywhere(keys, count, false);
    }

    @Override
    public int removeConsumed(String[] keys, int count) {
        return removeEverywhere(keys, count, true);
    }

    /**
     * Removes from every tier; returns the most keys that any one tier held. A lower tier that fails has the removal
     * of every key queued for a retry; only the first tier's failure is thrown. Objects a reader consumed leave the
     * first tier now and the lower tiers from the write-back queue, where it has room (the rest now): meanwhile this
     * store reads none of them below, so only a reader of a lower tier alone may still find them there.
     */
    private int removeEverywhere(String[] keys, int count, boolean consumed) {
        String op = consumed ? "removeConsumed" : "removeBatch";
        checkOpen(op, null);
        requireRemove(op, count > 0 ? keys[0] : null);
        if (writeBack != null) {
            for (int k = 0; k < count; k++) {
                writeBack.cancel(keys[k]);
            }
        }
        String[] below = keys;
        int belowCount = count;
        if (consumed && writeBack != null) {
            int queued = writeBack.queueRemovals(keys, count, ((1 << tiers.length) - 1) & ~1);
            if (queued > 0) {
                below = Arrays.copyOfRange(keys, queued, count);
                belowCount = count - queued;
            }
        }
        int existed = 0;
        KVException first = null;
        for (int i = 0; i < tiers.length; i++) {
            String[] k = i == 0 ? keys : below;
            int n = i == 0 ? count : belowCount;
            if (n == 0) {
                continue;
            }
            try {
                existed = Math.max(existed, consumed ? tiers[i].removeConsumed(k, n) : tiers[i].removeBatch(k, n));
            } catch (KVException e) {
                stats[i].error();
                KVException named = tierFailed(i, op, k[0], e);
                if (i == 0) {
                    first = named;
                } else {
                    writeBack.retryRemovals(k, n, 1 << i, named);
                }
            }
        }
        if (first != null) {
            throw first;
        }
        for (int k = 0; existed > 0 && k < count; k++) {
            tell(StoreEvent.Type.REMOVED, keys[k], -1);
        }
        return existed;
    }

    @Override
    public StoreClaim newClaim() {
        checkOpen("newClaim", null);
        return new TieredClaim(this, tiers[0].newClaim());
    }

    @Override
    public int tryClaim(String key, long bytes, PutOptions putOptions, StoreClaim claim) {
        checkOpen("tryClaim", key);
        TieredClaim c = TieredClaim.ownedBy(this, claim, key);
        if (backMode) {
            if (!writeBack.reserve()) {
                return ClaimResult.FULL;
            }
            c.reserved = true;
        }
        int r = ClaimResult.FULL;
        try {
            r = tiers[0].tryClaim(key, bytes, putOptions, c.first);
        } finally {
            if (r != ClaimResult.CLAIMED) {
                dropReservation(c);
            }
        }
        c.key = key;
        c.options = putOptions;
        return r;
    }

    /** Publishes a claim: the lower tiers first (write-through) or after (write-back), then the first tier. */
    boolean commit(TieredClaim c) {
        MemorySegment value = c.first.segment();
        if (!backMode) {
            try {
                for (int i = 1; i < tiers.length; i++) {
                    putInto(i, c.key, value, c.options);
                }
            } catch (KVException e) {
                c.first.abort();
                throw e;
            }
        }
        boolean visible = false;
        try {
            visible = c.first.commit();
            stats[0].written(visible ? value.byteSize() : 0);
            if (visible) {
                tell(StoreEvent.Type.STORED, c.key, value.byteSize());
            }
            if (!backMode && writeBack != null) {
                writeBack.supersede(c.key, c.options);
            }
        } finally {
            if (c.reserved && visible) {
                c.reserved = false;
                writeBack.offer(c.key, c.options);
            }
            dropReservation(c);
        }
        return visible;
    }

    /** Gives back the write-back place a claim held, if any. */
    void dropReservation(TieredClaim c) {
        if (c.reserved) {
            c.reserved = false;
            writeBack.unreserve();
        }
    }

    @Override
    public StoreView newView() {
        checkOpen("newView", null);
        return new TieredView(this, tiers[0].newView());
    }

    @Override
    public long tryView(String key, StoreView view) {
        checkOpen("tryView", key);
        TieredView v = TieredView.ownedBy(this, view, key);
        KVException lowest = null;
        try {
            long r = tiers[0].tryView(key, v.first);
            if (GetResult.isHit(r)) {
                stats[0].hit(r);
                return r;
            }
        } catch (KVException e) {
            lowest = absorb(0, "tryView", key, e, null);
        }
        for (int i = 1; i < tiers.length && !removedBelow(key); i++) {
            MemorySegment buffer = null;
            try {
                // One round trip to the tier: a read into a buffer as large as the last object a lower tier served
                // (a request's layer objects are alike), and a second read only when the object is larger.
                buffer = buffers.acquire(Math.max(1, lowerObjectBytes));
                long r = tiers[i].getInto(key, buffer);
                if (GetResult.isTooSmall(r)) {
                    buffers.release(buffer);
                    buffer = null;
                    buffer = buffers.acquire(GetResult.requiredSize(r));
                    r = tiers[i].getInto(key, buffer);
                }
                report(lowest);
                lowest = null;
                if (GetResult.isHit(r)) {
                    lowerObjectBytes = r;
                    stats[i].hit(r);
                    promote(key, buffer, r, i);
                    v.holdCopy(buffer, r);
                    buffer = null;
                    return r;
                }
            } catch (KVException e) {
                lowest = absorb(i, "tryView", key, e, lowest);
            } finally {
                if (buffer != null) {
                    buffers.release(buffer);
                }
            }
        }
        return missOrThrow(lowest);
    }

    void releaseBuffer(MemorySegment buffer) {
        buffers.release(buffer);
    }

    /**
     * Waits until every waiting write-back has gone out, or {@code timeoutMillis} passed.
     *
     * @return whether the lower tiers now hold everything the first tier acknowledged (true for write-through)
     */
    public boolean flush(long timeoutMillis) throws InterruptedException {
        return writeBack == null || writeBack.awaitIdle(timeoutMillis);
    }

    /** Each tier's counters, fastest first, with its part of the write-back queue now. */
    public List<TierStats.Snapshot> tierStats() {
        List<TierStats.Snapshot> out = new ArrayList<>(stats.length);
        for (int i = 0; i < stats.length; i++) {
            out.add(stats[i].snapshot(writeBack == null ? 0 : writeBack.depthFor(i)));
        }
        return out;
    }

    /**
     * The write-back queue's counters: its write-backs (none for write-through) and the removals it retries (either
     * mode); all zero for a single tier.
     */
    public WriteBackStats writeBackStats() {
        return writeBack == null ? new WriteBackStats(0, 0, 0, 0, 0, 0, 0, null, 0, 0) : writeBack.snapshot();
    }

    /**
     * Subscribes to the events of every tier that tells them, merged (see {@link TieredEvents}): each tier's naming
     * it, and a removal from this store as a whole once no tier holds the object.
     */
    @Override
    public StoreSubscription subscribe(StoreEventListener listener, ErrorHandler handler) {
        checkOpen("subscribe", null);
        if (!capabilities.contains(StoreCapability.EVENTS)) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "no tier of this store tells its events").store(uri)
                    .operation("subscribe").hint("shm: and valkey:// tiers do").build();
        }
        if (listener == null || handler == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "subscribe needs a listener and an error handler")
                    .store(uri).operation("subscribe").build();
        }
        TieredEvents events = TieredEvents.subscribe(uri, tiers, listener, handler, subscriptions::remove);
        subscriptions.add(events);
        return events;
    }

    /** Tells the subscribers that {@code key} was stored in, or removed from, this store through a call to it. */
    private void tell(StoreEvent.Type type, String key, long bytes) {
        for (TieredEvents e : subscriptions) {
            e.tell(type, key, bytes);
        }
    }

    /** Where lower tiers' failures that this store absorbs, and those of its write-back threads, are reported. */
    @Override
    public void errorHandler(ErrorHandler handler) {
        if (handler == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the error handler is null").store(uri)
                    .operation("errorHandler").build();
        }
        this.errors = handler;
    }

    /**
     * Refuses consume mode when no tier can remove: every consumed object would stay in every tier (and write-back
     * would still copy it down), so a consumer's "removed after reading" would never hold.
     */
    @Override
    public void checkConsumeMode() {
        if (!capabilities.contains(StoreCapability.REMOVE)) {
            StringBuilder names = new StringBuilder();
            for (int i = 0; i < tiers.length; i++) {
                names.append(i == 0 ? "" : ", ").append("tier ").append(i + 1).append(" (").append(tiers[i].uri())
                        .append(')');
            }
            throw KVException.of(ErrorCode.INVALID_CONFIG, "consume mode over a write-" + (options.writeBack()
                            ? "back" : "through") + " tiered store none of whose tiers can remove objects: " + names
                            + " declare no REMOVE, so every consumed object would stay in every tier"
                            + (options.writeBack() ? " and the write-back would still copy it down" : ""))
                    .store(uri).operation("connect")
                    .hint("use DropMode.RETAIN (kvc.connector.dropMode=retain), or tiers that can remove").build();
        }
    }

    /** Checks every tier, and names each with its answer; throws when any tier fails, naming every one. */
    @Override
    public String healthCheck() {
        StringBuilder report = new StringBuilder(uri).append(options.writeBack() ? " (write-back" : " (write-through")
                .append(options.promoteOnHit() ? ", promote on hit)" : ", no promotion)");
        KVException failure = null;
        for (int i = 0; i < tiers.length; i++) {
            report.append("\n  tier ").append(i + 1).append(" of ").append(tiers.length).append(": ");
            try {
                report.append(tiers[i].healthCheck());
            } catch (KVException e) {
                report.append("FAILED: ").append(e.getMessage());
                failure = failure == null ? e : failure;
            }
        }
        if (failure != null) {
            throw KVException.of(failure.code(), report.toString()).store(uri).operation("healthCheck")
                    .hint(failure.hint()).cause(failure).build();
        }
        return report.toString();
    }

    /**
     * Closes the event subscriptions, drains the write-back queue (write-backs and removal retries) for up to
     * {@code drain-timeout}, then closes every tier.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        List<TieredEvents> open = List.copyOf(subscriptions);
        open.forEach(TieredEvents::close);
        RuntimeException failure = null;
        if (writeBack != null) {
            writeBack.close(options.drainMillis());
        }
        for (KVStore t : tiers) {
            try {
                t.close();
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
            }
        }
        // Views that still hold a lower tier's copy keep their lease; the pool frees the memory anyway, and
        // their segments throw on access from now on, as StoreView says.
        long heldByViews = buffers.outstandingLeases();
        try {
            buffers.close();
        } catch (KVException e) {
            if (heldByViews == 0) {
                failure = failure == null ? e : failure;
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    void checkOpen(String op, String key) {
        if (closed.get()) {
            throw KVException.of(ErrorCode.CLOSED, "the tiered store is closed").store(uri).operation(op).key(key)
                    .build();
        }
    }

    private void requireRemove(String op, String key) {
        if (!capabilities.contains(StoreCapability.REMOVE)) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "no tier of this store can remove objects").store(uri)
                    .operation(op).key(key).hint("its entries leave by each tier's own eviction; use "
                            + "DropMode.RETAIN").build();
        }
    }

    private KVException tierFailed(int tier, String op, String key, KVException e) {
        return KVException.of(e.code(), "tier " + (tier + 1) + " of " + tiers.length + " (" + tiers[tier].uri()
                + "): " + e.getMessage()).store(uri).operation(op).key(key).hint(e.hint()).cause(e).build();
    }
}
