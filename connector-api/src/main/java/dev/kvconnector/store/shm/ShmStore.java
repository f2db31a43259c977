package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.store.SubscriptionThread;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code shm:} store: byte objects in a memory-mapped file that any number of processes on one host open at
 * once, exchanging values at memory speed with no server.
 *
 * <p>URI: {@code shm:/NAME?capacity=4GiB&dir=/dev/shm&entries=65536&block=4KiB&ttl=0}; the package comment lists
 * each option, its default, which opener's sizes hold, and what a call allocates.
 *
 * <p>Keys are up to {@value #MAX_KEY_BYTES} UTF-8 bytes, kept in the file as those bytes. A {@link StoreKey}'s bytes
 * are taken as they are, a {@code String} is encoded, so both forms of a key name the same object; every
 * {@code StoreKey} method is overridden to allocate nothing ({@code sendGetIntoBatch} excepted: this store does not
 * declare {@link StoreCapability#PIPELINED_READ}). When the store is full, a put evicts committed, unleased entries in
 * CLOCK order: recently read entries get a second chance, expired ones do not. {@link dev.kvconnector.store.Pin} is
 * ignored. Values being read are never evicted, freed or overwritten underneath their readers. Expiry uses the wall
 * clock ({@code System.currentTimeMillis()}), the one clock all processes share.
 *
 * <p>Limits: 64 store instances open on one file at once (across all processes), and 63 reads in flight per
 * instance (further readers spin until one finishes), of which at most {@value #MAX_VIEWS} held views.
 *
 * <p>Threads and processes: reads take no lock; each leases its entry in the file while it copies, and eviction and
 * removal never free a leased entry. Puts allocate under one cross-process spin lock in the file, copy outside it,
 * then swap the value into the index. A process killed at any point leaves nothing visible half-written: its
 * unfinished puts, its leases and the lock are recovered by whoever next finds it dead (pid plus start time), so all
 * processes must share a pid namespace.
 *
 * <p>Events ({@link StoreCapability#EVENTS}): every store, removal, eviction and expiry, by any process, is written
 * to an event ring in the file; {@link #subscribe} reads it on a thread of its own. An expiry is told when a process
 * notices it (a read, an eviction sweep, {@link #reclaim()}), not the moment the TTL passes. A subscriber that falls
 * a whole ring ({@code events=}, default 1 MiB) behind, or a writer killed holding the lock, shows as a gap in the
 * sequence numbers.
 *
 * <p>Zero-copy ({@link StoreCapability#CLAIM}, {@link StoreCapability#VIEW}) through {@link ShmClaim} and
 * {@link ShmView}; a file truncated under a running store is named at this boundary ({@link ShmFileSize}): the package
 * comment says what each does.
 *
 * <p>Over 400 lines because every call that takes a key has two entry points, a {@code String} encoded and a
 * {@link StoreKey} taken as it is, over one implementation that enters the call gate and names a truncation; what the
 * calls do is in the parts behind it.
 *
 * @see dev.kvconnector.store.shm the parts, of one idea each, behind this facade
 */
public final class ShmStore implements KVStore {
    /** Test hook: ms to pause in the middle of each put's copy. */
    public static final String PROP_PUT_PAUSE_MS = "kvconnector.shm.testHook.putPauseMillis";
    /** Test hook: ms to pause in the middle of each hit's copy. */
    public static final String PROP_GET_PAUSE_MS = "kvconnector.shm.testHook.getPauseMillis";
    /** Test hook: ms to pause while holding the store lock in each put. */
    public static final String PROP_LOCK_PAUSE_MS = "kvconnector.shm.testHook.lockPauseMillis";
    /** Test hook: ms to pause half-way through writing each event record, holding the store lock. */
    public static final String PROP_EVENT_PAUSE_MS = "kvconnector.shm.testHook.eventPauseMillis";
    /** Default payload capacity: 1 GiB. */
    public static final long DEFAULT_CAPACITY = 1L << 30;
    /** Default directory. */
    public static final String DEFAULT_DIR = "/dev/shm";
    /** Default block size: 4 KiB. */
    public static final long DEFAULT_BLOCK = 4096;
    /** Longest key, in UTF-8 bytes. */
    public static final int MAX_KEY_BYTES = ShmLayout.MAX_KEY_BYTES;
    /**
     * Most views one store instance holds at once: the rest of its 63 lease records stay for reads in flight, which
     * would otherwise spin for a record as long as the views are held.
     */
    public static final int MAX_VIEWS = 48;

    private static final Logger LOG = LoggerFactory.getLogger(ShmStore.class);
    private static final Set<StoreCapability> CAPABILITIES =
            Set.copyOf(EnumSet.of(StoreCapability.NATIVE_TTL, StoreCapability.SHARED_ACROSS_PROCESSES,
                    StoreCapability.LOCAL_MEMORY, StoreCapability.REMOVE, StoreCapability.CLAIM,
                    StoreCapability.VIEW, StoreCapability.EVENTS));

    private final String uri;
    private final ShmFile file;
    private final ShmLayout lay;
    private final ShmParts parts;
    private final int procSlot;
    private final ShmReader reader;
    private final ShmWriter writer;
    private final CallGate gate;
    /** Open subscriptions, closed before the file is unmapped; guarded by itself. */
    private final List<ShmSubscription> subscriptions = new ArrayList<>();

    private ShmStore(ShmOptions o, ShmFile file) {
        this.uri = o.uri();
        this.file = file;
        this.lay = file.layout();
        this.gate = new CallGate(file, uri);
        this.parts = new ShmParts(file.map(), lay, file.path(), uri, o.lockTimeoutMillis(), o.evictLive());
        this.procSlot = parts.leases.claimSlotOrThrow(file.path(), uri);
        this.reader = new ShmReader(file, parts, procSlot, uri);
        this.writer = new ShmWriter(file, parts, reader, o);
    }

    /**
     * Opens, or creates, the store named by {@code uri}.
     *
     * @throws KVException INVALID_URI for bad options, INVALID_CONFIG when the file's sizes differ from the URI's,
     *     CORRUPT_OBJECT for a file that is not a valid store of this format version, naming the file and what is
     *     wrong, AUTH_FAILED for a file of another user, BUSY when 64 instances have it open, IO_ERROR
     */
    public static ShmStore open(StoreUri uri) {
        ShmOptions o = ShmOptions.parse(uri);
        ShmFile file = ShmFile.open(o.path(), o.wanted(), o.uri());
        ShmStore store;
        try {
            o.checkAgainst(file.layout());
            store = new ShmStore(o, file);
        } catch (RuntimeException e) {
            file.close();
            throw e;
        }
        try {
            store.writer.reclaimDead();
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
        LOG.debug("opened {} at {}: {} bytes in {} blocks, {} entries", o.uri(), o.path(), store.lay.capacity(),
                store.lay.blockCount(), store.lay.entryCount());
        return store;
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return CAPABILITIES;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        return put(KeyScratch.of(key, "put", uri), value, options);
    }

    /** {@link #put(String, MemorySegment, PutOptions)}, taking the key's bytes as they are: allocates nothing. */
    @Override
    public boolean put(StoreKey key, MemorySegment value, PutOptions options) {
        return put(KeyScratch.of(key, "put", uri), value, options);
    }

    private boolean put(KeyScratch k, MemorySegment value, PutOptions options) {
        long fileSize = gate.enter("put", k);
        try {
            return writer.put(k, value, options, fileSize);
        } catch (InternalError fault) {
            throw file.size().named(fault, "put", k);
        } finally {
            gate.exit();
        }
    }

    /** Loops over {@link #put(StoreKey, MemorySegment, PutOptions)}: allocates nothing. */
    @Override
    public void putBatch(StoreKey[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        for (int i = 0; i < count; i++) {
            stored[i] = put(keys[i], values[i], options);
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        return getInto(KeyScratch.of(key, "get", uri), dst);
    }

    /** {@link #getInto(String, MemorySegment)}, taking the key's bytes as they are: allocates nothing. */
    @Override
    public long getInto(StoreKey key, MemorySegment dst) {
        return getInto(KeyScratch.of(key, "get", uri), dst);
    }

    private long getInto(KeyScratch k, MemorySegment dst) {
        long fileSize = gate.enter("get", k);
        try {
            return reader.getInto(k, dst, fileSize);
        } catch (InternalError fault) {
            throw file.size().named(fault, "get", k);
        } finally {
            gate.exit();
        }
    }

    /** Loops over {@link #getInto(StoreKey, MemorySegment)}: allocates nothing. */
    @Override
    public void getIntoBatch(StoreKey[] keys, MemorySegment[] dsts, int count, long[] results) {
        for (int i = 0; i < count; i++) {
            results[i] = getInto(keys[i], dsts[i]);
        }
    }

    @Override
    public long size(String key) {
        KeyScratch k = KeyScratch.of(key, "size", uri);
        long fileSize = gate.enter("size", k);
        try {
            return reader.size(k, fileSize);
        } catch (InternalError fault) {
            throw file.size().named(fault, "size", k);
        } finally {
            gate.exit();
        }
    }

    @Override
    public boolean remove(String key) {
        return remove(KeyScratch.of(key, "remove", uri));
    }

    private boolean remove(KeyScratch k) {
        gate.enter("remove", k);
        try {
            return writer.remove(k);
        } catch (InternalError fault) {
            throw file.size().named(fault, "remove", k);
        } finally {
            gate.exit();
        }
    }

    /** Removes each key as {@link #remove(String)} does, taking the keys' bytes as they are: allocates nothing. */
    @Override
    public int removeConsumed(StoreKey[] keys, int count) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (remove(KeyScratch.of(keys[i], "remove", uri))) {
                n++;
            }
        }
        return n;
    }

    /** A claim handle for this store. */
    @Override
    public StoreClaim newClaim() {
        gate.enter("newClaim", null);
        gate.exit();
        return new ShmClaim(this, uri, gate, writer);
    }

    /**
     * Takes space as a put does, invisible until the commit; {@code FULL} where a put would fail with STORE_FULL.
     * Allocates nothing once the same blocks have been claimed before (see {@link SliceCache}).
     */
    @Override
    public int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        return tryClaim(KeyScratch.of(key, "tryClaim", uri), bytes, options, claim);
    }

    /** {@link #tryClaim(String, long, PutOptions, StoreClaim)}, taking the key's bytes as they are. */
    @Override
    public int tryClaim(StoreKey key, long bytes, PutOptions options, StoreClaim claim) {
        return tryClaim(KeyScratch.of(key, "tryClaim", uri), bytes, options, claim);
    }

    private int tryClaim(KeyScratch k, long bytes, PutOptions options, StoreClaim claim) {
        long fileSize = gate.enter("tryClaim", k);
        try {
            return writer.claim(k, bytes, options, ShmClaim.ownedBy(this, uri, claim, k), fileSize);
        } catch (InternalError fault) {
            throw file.size().named(fault, "tryClaim", k);
        } finally {
            gate.exit();
        }
    }

    /** A view handle for this store. */
    @Override
    public StoreView newView() {
        gate.enter("newView", null);
        gate.exit();
        return new ShmView(this, uri, gate, reader);
    }

    /**
     * A get whose lease lasts until the view's release; BUSY beyond {@value #MAX_VIEWS} views held. Allocates nothing
     * once the same value has been viewed before (see {@link SliceCache}).
     */
    @Override
    public long tryView(String key, StoreView view) {
        return tryView(KeyScratch.of(key, "tryView", uri), view);
    }

    /** {@link #tryView(String, StoreView)}, taking the key's bytes as they are. */
    @Override
    public long tryView(StoreKey key, StoreView view) {
        return tryView(KeyScratch.of(key, "tryView", uri), view);
    }

    private long tryView(KeyScratch k, StoreView view) {
        long fileSize = gate.enter("tryView", k);
        try {
            return reader.view(k, ShmView.ownedBy(this, uri, view, k), fileSize);
        } catch (InternalError fault) {
            throw file.size().named(fault, "tryView", k);
        } finally {
            gate.exit();
        }
    }

    /**
     * Subscribes {@code listener} to the events of every process that writes this file, from now on; see the class
     * comment for what is told and when. Each subscription holds a thread ({@code kvconnector-events-shm-N}).
     */
    @Override
    public StoreSubscription subscribe(StoreEventListener listener, ErrorHandler errors) {
        gate.enter("subscribe", null);
        try {
            if (listener == null || errors == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "subscribe needs a listener and an error handler")
                        .store(uri).operation("subscribe").build();
            }
            long epoch = file.map().get(ValueLayout.JAVA_LONG, ShmLayout.H_EVENT_EPOCH);
            ShmSubscription s = new ShmSubscription(uri, epoch, file, new EventReceiver(file.map(), lay), listener,
                    errors, this::forget);
            synchronized (subscriptions) {
                subscriptions.add(s);
            }
            s.start();
            return s;
        } finally {
            gate.exit();
        }
    }

    private void forget(SubscriptionThread s) {
        synchronized (subscriptions) {
            subscriptions.remove(s);
        }
    }

    @Override
    public String healthCheck() {
        long fileSize = gate.enter("healthCheck", null);
        try {
            if (fileSize < lay.fileSize()) {
                throw file.size().cutShort(fileSize, "healthCheck", null, null);
            }
            return uri + " at " + file.path() + " answered: " + freeBytes() + " of " + lay.capacity() + " bytes free, "
                    + liveEntries() + " of " + lay.entryCount() + " entries live, " + parts.entries.retired()
                    + " removed but still being read";
        } finally {
            gate.exit();
        }
    }

    /**
     * Closes this instance's event subscriptions, frees its open claims and drops its views' leases (freeing entries
     * removed while viewed), releases its slot in the file and unmaps it. The file stays for other processes. Claim
     * and view segments throw {@link IllegalStateException} from now on; releasing a view afterwards only empties the
     * handle. A file truncated into its tables is only unmapped (a warning names it).
     */
    @Override
    public void close() {
        if (!gate.close()) {
            return;
        }
        List<ShmSubscription> open;
        synchronized (subscriptions) {
            open = List.copyOf(subscriptions);
        }
        open.forEach(ShmSubscription::close);
        try {
            long fileSize = file.size().now();
            if (file.size().holdsTables(fileSize)) {
                writer.freeAtClose(procSlot);
                parts.leases.releaseSlot(procSlot);
            } else {
                LOG.warn("closing {}: {}", uri, file.size().cutShort(fileSize, "close", null, null).getMessage());
            }
        } catch (InternalError fault) {
            LOG.warn("closing {}: {}", uri, file.size().named(fault, "close", null).getMessage());
        } finally {
            file.close();
        }
    }

    /** Bytes of payload space not allocated to any entry, in bytes (whole blocks). */
    public long freeBytes() {
        gate.enter("freeBytes", null);
        try {
            return (lay.blockCount() - parts.blocks.usedBlocks()) * lay.blockSize();
        } finally {
            gate.exit();
        }
    }

    /** Payload capacity in bytes. */
    public long capacityBytes() {
        return lay.capacity();
    }

    /** Committed entries in the index, expired ones included until they are reclaimed. */
    public long liveEntries() {
        gate.enter("liveEntries", null);
        try {
            return parts.index.live();
        } finally {
            gate.exit();
        }
    }

    /** The file backing this store. */
    public Path path() {
        return file.path();
    }

    /**
     * Reclaims what dead processes left (unfinished puts, leases, process slots), expired entries, and removed
     * entries whose readers have finished. Puts do this by themselves when space runs out; call it to get the
     * space back sooner.
     */
    public void reclaim() {
        gate.enter("reclaim", null);
        try {
            writer.reclaim();
        } catch (InternalError fault) {
            throw file.size().named(fault, "reclaim", null);
        } finally {
            gate.exit();
        }
    }

    /** The token of the process that holds the store lock, or 0; for tests. */
    long lockOwner() {
        return parts.lock.owner();
    }

    /** Lease records held in the file by all processes; for tests. */
    int leasesHeld() {
        return parts.leases.held();
    }
}
