package dev.kvconnector.mooncake;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.Pin;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.RegisteredMemory;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code mooncake://} store: Mooncake Store through its C ABI ({@code libmooncake_store.so}), bound with FFM.
 * See {@link MooncakeConfig} for the URI.
 *
 * <p><b>Zero copy.</b> At open the store allocates one off-heap staging region ({@code staging=}, cut into
 * {@code staging-slots=} equal slots) and registers it once. A value or destination that lies inside a registered
 * range (the staging region, or memory given to {@link #register}) moves with {@code put_from}/{@code get_into}
 * directly; any other segment, heap segments included, is copied through a staging slot. Unregistered native memory
 * larger than a slot still works, more slowly: a put goes through the client's own local buffer ({@code put},
 * {@code buffer=} bytes at most) and a get registers the destination for the call. Heap memory larger than a slot
 * is {@code VALUE_TOO_LARGE}. Batches use {@code batch_put_from}/{@code batch_get_into}.
 *
 * <p><b>Claim and view</b> (with {@code claim-view=true}, off by default: see {@link MooncakeConfig#DEFAULT_CLAIM_VIEW}
 * for why). A claim ({@link MooncakeClaim}) lends a staging slot,
 * so the caller's gather writes straight into registered memory, and its commit is a put of that slot
 * ({@code put_from}, no staging copy); {@code FULL} when no slot is free now, {@code VALUE_TOO_LARGE} beyond a slot.
 * A view ({@link MooncakeView}) is a {@code get_into} of a slot, lent out read-only until its release; it waits for
 * a free slot as a get does, so a thread must not hold as many views and claims as there are slots.
 *
 * <p><b>Device memory.</b> With {@code gpu-direct=true} (the default for {@code protocol=rdma}) the store declares
 * {@link StoreCapability#DEVICE_MEMORY}: the connector registers its CUDA device staging buffers here
 * ({@code register_buffer} on the device address), and layers move between GPU memory and the pool with
 * {@code put_from}/{@code get_into} and no host copy, through GPUDirect RDMA. The store never reads such memory
 * itself: every registered value of more than one byte goes to Mooncake as it is.
 *
 * <p><b>Semantics over an ABI that never overwrites.</b>
 * <ul>
 *   <li>A replacing put removes the key, then puts it: Mooncake keeps the old value of an existing key. Two
 *       replacing puts racing on one key may leave either value.</li>
 *   <li>A put with {@link PutOptions#immutable()} (the store declares {@link StoreCapability#IMMUTABLE}) skips that
 *       remove, one master RPC per key: an existing key keeps its value, which the writer promised is the same,
 *       and the put reports {@code true}. A put that finds the object already there ({@code OBJECT_ALREADY_EXISTS},
 *       -705) has lost such a race and reports {@code true} as well.</li>
 *   <li>An if-absent put checks the size first and puts only on a miss; it reports {@code true} even when another
 *       writer got in between, and then the other writer's value stays (Mooncake keeps the first value).</li>
 *   <li>A put that finds the pool full (-200) is retried {@code full-retries=} times with a doubling back-off from
 *       {@code full-backoff=}, as Mooncake evicts in the meantime, then fails with {@code STORE_FULL}.</li>
 *   <li>A remove that finds the object leased by a reader (-706) waits for the lease to end, up to
 *       {@code lease-wait=}, or removes with force: see {@link LeasePolicy}.</li>
 *   <li>Existence and size use {@code get_size}, which grants no lease in the documented ABI, so checking does not
 *       block a later remove (unlike {@code is_exist}).</li>
 *   <li>A get whose destination is too small (-600) asks {@code get_size} and answers
 *       {@link GetResult#tooSmall(long)}. A get of an object whose put has not finished (-703) is a miss.</li>
 *   <li>Objects have no TTL in Mooncake: {@link PutOptions#ttlMillis()} is ignored, and objects live until removed
 *       or evicted.</li>
 *   <li>Mooncake stores no empty objects, so an empty value is stored as one zero byte plus a marker object under
 *       the key with {@code #kvc-empty} appended; other Mooncake clients see the one byte. Removing the key leaves the
 *       one-byte marker behind until the key's next one-byte put.</li>
 * </ul>
 *
 * <p>Thread-safe. {@link #close()} waits for calls in flight (the native client must not be destroyed under a
 * call), releases every registration and destroys the client.
 *
 * <p>Over 400 lines because it maps every operation of the store ABI (single and batch puts and gets, leases,
 * registration, device buffers, claims and views of staging slots) with its own error translation; the binding,
 * configuration, staging and the claim and view handles already live in their own classes.
 */
public final class MooncakeStore implements KVStore, RegisteredMemory {
    private static final Logger LOG = LoggerFactory.getLogger(MooncakeStore.class);

    private static final int RC_NO_AVAILABLE_HANDLE = -200;
    private static final int RC_INVALID_PARAMS = -600;
    private static final int RC_REPLICA_NOT_READY = -703;
    private static final int RC_OBJECT_NOT_FOUND = -704;
    private static final int RC_OBJECT_ALREADY_EXISTS = -705;
    private static final int RC_OBJECT_HAS_LEASE = -706;
    private static final long MAX_BACKOFF_MILLIS = 1000;
    private static final long MAX_LEASE_POLL_MILLIS = 50;
    private static final long CLOSE_DRAIN_MILLIS = 30_000;
    private static final AtomicLong LIVE_STORES = new AtomicLong();
    private static final long CLOSE_POLL_NANOS = 200_000;
    private static final long STAGING_ALIGNMENT = 4096;
    /** Suffix of the marker object that says a one-byte object stands for an empty value. */
    static final String EMPTY_MARKER_SUFFIX = "#kvc-empty";

    private final MooncakeConfig config;
    private final String uri;
    private final MooncakeStoreLibrary lib;
    private final Arena clientArena;
    private final MemorySegment client;
    private final Arena stagingArena;
    private final MemorySegment staging;
    private final StagingPool pool;
    private final String clientHostname;
    /** Every registered range (staging and callers'), start address to length in bytes. */
    private final ConcurrentSkipListMap<Long, Long> registeredRanges = new ConcurrentSkipListMap<>();
    /** Ranges registered through {@link #register}, released on close. */
    private final ConcurrentHashMap<Long, Long> callerRanges = new ConcurrentHashMap<>();
    private final AtomicLong inFlight = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();

    private MooncakeStore(MooncakeConfig config, String uri, MooncakeStoreLibrary lib) {
        this.config = config;
        this.uri = uri;
        this.lib = lib;
        clientArena = Arena.ofShared();
        client = lib.createOwnedBy(clientArena);
        try {
            if (client.equals(MemorySegment.NULL)) {
                throw KVException.of(ErrorCode.INTERNAL, "mooncake_store_create returned NULL").store(uri)
                        .operation("open").hint("the native client could not allocate itself; check memory").build();
            }
            int rc = MooncakeSetup.run(lib, client, clientArena, config, uri, setupContext());
            if (rc != 0) {
                throw MooncakeStatus.toException(rc, uri, "setup", null, setupContext());
            }
            stagingArena = Arena.ofShared();
        } catch (MooncakeSetup.Abandoned e) {
            throw e.error(); // the setup thread destroys the client when the native call returns
        } catch (RuntimeException e) {
            clientArena.close();
            throw e;
        }
        try {
            staging = stagingArena.allocate(config.stagingBytes(), STAGING_ALIGNMENT);
            int rc = lib.registerBuffer(client, staging, staging.byteSize());
            if (rc != 0) {
                throw MooncakeStatus.toException(rc, uri, "register staging", null,
                        staging.byteSize() + " bytes at 0x" + Long.toHexString(staging.address()));
            }
            registeredRanges.put(staging.address(), staging.byteSize());
            pool = new StagingPool(staging, config.stagingSlots());
            clientHostname = lib.hostname(client);
        } catch (RuntimeException e) {
            clientArena.close();
            stagingArena.close();
            throw e;
        }
        LIVE_STORES.incrementAndGet();
    }

    /**
     * How many stores of this process are open and not closed yet, whose native client and staging arenas are
     * therefore open: the test kit's leak check reads it, as nothing outside the store sees those arenas.
     */
    public static long liveStores() {
        return LIVE_STORES.get();
    }

    /**
     * Opens a store: validates the configuration, locates and binds the library, probes the master
     * ({@link MooncakeSetup}), sets the client up under the setup deadline and registers the staging region.
     *
     * @param env the environment ({@code MOONCAKE_CONFIG_PATH}, {@code MOONCAKE_STORE_LIB}); normally
     *     {@code System.getenv()}
     */
    public static MooncakeStore open(StoreUri uri, Map<String, String> env) {
        MooncakeConfig config = MooncakeConfig.from(uri, env);
        MooncakeLibraryLocation location = MooncakeLibraryLocator.locate(config.library(), env,
                System.getProperty("java.library.path"), uri.masked());
        MooncakeStoreLibrary lib = MooncakeStoreLibrary.load(location);
        MooncakeSetup.probe(config, uri.masked());
        MooncakeStore store = new MooncakeStore(config, uri.masked(), lib);
        LOG.info("Opened {}: client {}, master {}, library {}, staging {} x {} bytes", store.uri,
                store.clientHostname, config.masterServerAddress(), location, config.stagingSlots(),
                store.pool.slotBytes());
        return store;
    }

    /** The validated configuration. */
    public MooncakeConfig config() {
        return config;
    }

    /** The library in use. */
    public MooncakeLibraryLocation library() {
        return lib.location();
    }

    /** This client's {@code host:port} as Mooncake advertises it, or null if it could not say. */
    public String clientHostname() {
        return clientHostname;
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        EnumSet<StoreCapability> caps = EnumSet.of(StoreCapability.REGISTERED_MEMORY, StoreCapability.BATCH,
                StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.REMOVE, StoreCapability.IMMUTABLE);
        if (config.gpuDirect()) {
            caps.add(StoreCapability.DEVICE_MEMORY);
        }
        if (config.claimView()) {
            caps.add(StoreCapability.CLAIM);
            caps.add(StoreCapability.VIEW);
        }
        return caps;
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        checkKey(key, "put");
        Objects.requireNonNull(value, "value");
        Objects.requireNonNull(options, "options");
        checkValueSize(key, value);
        enter("put", key);
        try {
            return putChecked(key, value, options, null, "put");
        } finally {
            exit();
        }
    }

    /**
     * A put whose arguments were checked, inside {@link #enter}: the if-absent check or the replacing remove, then
     * the value. {@code heldSlot} is a staging slot the caller holds (a claim's, holding the value), or null.
     */
    private boolean putChecked(String key, MemorySegment value, PutOptions options, MemorySegment heldSlot,
                               String operation) {
        if (options.ifAbsent()) {
            if (sizeOrMiss(key, operation) >= 0) {
                return false;
            }
        } else if (!options.immutable()) {
            removeWithLeasePolicy(key, operation);
        }
        if (heldSlot != null && value.byteSize() <= 1) {
            putTiny(key, value, heldSlot.asSlice(0, 1), replication(options));
        } else {
            putValue(key, value, replication(options));
        }
        return true;
    }

    /** Puts a value whose key is known to be free: zero copy, staged, empty, or through the local buffer. */
    private void putValue(String key, MemorySegment value, MooncakeStoreLibrary.Replication replication) {
        long n = value.byteSize();
        if (n <= 1) {
            MemorySegment[] slot = new MemorySegment[1];
            pool.acquire(slot, 1, closed::get, uri);
            try {
                putTiny(key, value, slot[0].asSlice(0, 1), replication);
            } finally {
                pool.release(slot, 1);
            }
        } else if (isRegistered(value)) {
            putWithRetry(key, value, replication, false);
        } else if (n <= pool.slotBytes()) {
            MemorySegment[] slot = new MemorySegment[1];
            pool.acquire(slot, 1, closed::get, uri);
            try {
                MemorySegment src = slot[0].asSlice(0, n);
                MemorySegment.copy(value, 0, src, 0, n);
                putWithRetry(key, src, replication, false);
            } finally {
                pool.release(slot, 1);
            }
        } else {
            // checkValueSize let it through: native memory that fits the client's own local buffer.
            putWithRetry(key, value, replication, true);
        }
    }

    /**
     * Mooncake stores no empty objects, so an empty value is a one-byte object plus a one-byte marker object under
     * {@code key + EMPTY_MARKER_SUFFIX}, written first so that no reader takes the placeholder byte for data. A real
     * one-byte value removes any marker left by an earlier empty value. Only one-byte objects cost a second lookup.
     * {@code one} is one byte of a staging slot the caller holds; {@code value} may be that very byte.
     */
    private void putTiny(String key, MemorySegment value, MemorySegment one,
                         MooncakeStoreLibrary.Replication replication) {
        if (value.byteSize() == 0) {
            one.set(ValueLayout.JAVA_BYTE, 0, (byte) 0);
            putWithRetry(key + EMPTY_MARKER_SUFFIX, one, replication, false);
        } else {
            int rc = lib.remove(client, key + EMPTY_MARKER_SUFFIX, true);
            if (rc != 0 && rc != RC_OBJECT_NOT_FOUND) {
                throw MooncakeStatus.toException(rc, uri, "put", key, "removing the empty-value marker");
            }
            MemorySegment.copy(value, 0, one, 0, 1);
        }
        putWithRetry(key, one, replication, false);
    }

    /** The logical size of an object whose native size is {@code nativeSize}: 0 for a marked empty value. */
    private long logicalSize(String key, long nativeSize) {
        return nativeSize == 1 && lib.getSize(client, key + EMPTY_MARKER_SUFFIX) >= 0 ? 0 : nativeSize;
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        checkKey(key, "getInto");
        Objects.requireNonNull(dst, "dst");
        enter("getInto", key);
        try {
            long capacity = dst.byteSize();
            if (isRegistered(dst)) {
                long r = lib.getInto(client, key, dst, capacity);
                return r >= 0 ? logicalSize(key, r) : getFailure(key, r, dst);
            }
            long r;
            MemorySegment[] slot = new MemorySegment[1];
            pool.acquire(slot, 1, closed::get, uri);
            try {
                r = lib.getInto(client, key, slot[0], Math.min(capacity, pool.slotBytes()));
                if (r >= 0) {
                    r = logicalSize(key, r);
                    MemorySegment.copy(slot[0], 0, dst, 0, r);
                    return r;
                }
            } finally {
                pool.release(slot, 1);
            }
            return getFailure(key, r, dst);
        } finally {
            exit();
        }
    }

    /** A claim handle for this store; {@code UNSUPPORTED} without {@code claim-view=true}. */
    @Override
    public StoreClaim newClaim() {
        if (!config.claimView()) {
            return KVStore.super.newClaim();
        }
        checkOpen("newClaim");
        return new MooncakeClaim(this);
    }

    /**
     * Lends a free staging slot, without waiting: {@code FULL} when every slot is taken now (by claims, views or
     * transfers in flight). The pool itself is not asked for room before the commit, whose put retries a full pool
     * and then fails with {@code STORE_FULL} as a put does.
     *
     * @throws KVException {@code VALUE_TOO_LARGE} for more bytes than a staging slot holds
     */
    @Override
    public int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        if (!config.claimView()) {
            return KVStore.super.tryClaim(key, bytes, options, claim);
        }
        checkKey(key, "tryClaim");
        Objects.requireNonNull(options, "options");
        MooncakeClaim c = MooncakeClaim.ownedBy(this, claim, key);
        if (bytes < 0 || bytes > pool.slotBytes()) {
            throw KVException.of(bytes < 0 ? ErrorCode.INVALID_ARGUMENT : ErrorCode.VALUE_TOO_LARGE, "cannot claim "
                            + bytes + " bytes: a claim is one staging slot of " + pool.slotBytes() + " bytes")
                    .store(uri).operation("tryClaim").key(key)
                    .hint("raise staging= (or lower staging-slots=) for larger claims, or put the value").build();
        }
        enter("tryClaim", key);
        try {
            if (options.ifAbsent() && sizeOrMiss(key, "tryClaim") >= 0) {
                return ClaimResult.EXISTS;
            }
            MemorySegment slot = pool.tryAcquire();
            if (slot == null) {
                return ClaimResult.FULL;
            }
            c.hold(key, slot, bytes, options);
            return ClaimResult.CLAIMED;
        } finally {
            exit();
        }
    }

    /** The put of a claim's commit: {@code value} lies in {@code slot}, which the claim returns afterwards. */
    boolean commitClaim(String key, MemorySegment value, MemorySegment slot, PutOptions options) {
        enter("commit", key);
        try {
            return putChecked(key, value, options, slot, "commit");
        } finally {
            exit();
        }
    }

    /** A view handle for this store; {@code UNSUPPORTED} without {@code claim-view=true}. */
    @Override
    public StoreView newView() {
        if (!config.claimView()) {
            return KVStore.super.newView();
        }
        checkOpen("newView");
        return new MooncakeView(this);
    }

    /**
     * A {@code get_into} of a staging slot, which {@code view} then holds; waits for a free slot as a get does.
     *
     * @throws KVException {@code VALUE_TOO_LARGE} for an object larger than a staging slot (read it with
     *     {@link #getInto})
     */
    @Override
    public long tryView(String key, StoreView view) {
        if (!config.claimView()) {
            return KVStore.super.tryView(key, view);
        }
        checkKey(key, "tryView");
        MooncakeView v = MooncakeView.ownedBy(this, view, key);
        enter("tryView", key);
        try {
            MemorySegment[] slot = new MemorySegment[1];
            pool.acquire(slot, 1, closed::get, uri);
            long r;
            try {
                r = lib.getInto(client, key, slot[0], pool.slotBytes());
                if (r >= 0) {
                    r = logicalSize(key, r);
                    v.hold(slot[0], r);
                    return r;
                }
            } finally {
                if (!v.isHeld()) {
                    pool.release(slot, 1);
                }
            }
            if (r == RC_OBJECT_NOT_FOUND || r == RC_REPLICA_NOT_READY) {
                return GetResult.MISS;
            }
            if (r == RC_INVALID_PARAMS) {
                long size = sizeOrMiss(key, "tryView");
                if (size < 0) {
                    return GetResult.MISS;
                }
                throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "the object has " + size + " bytes, more than a "
                                + "staging slot of " + pool.slotBytes() + " bytes, which a view holds")
                        .store(uri).operation("tryView").key(key)
                        .hint("read it with getInto, or raise staging= (or lower staging-slots=)").build();
            }
            throw MooncakeStatus.toException(r, uri, "tryView", key, masterContext(r));
        } finally {
            exit();
        }
    }

    /** Gives back a staging slot that a claim or a view held. */
    void returnSlot(MemorySegment slot) {
        pool.release(slot);
    }

    /** Throws {@code CLOSED} once the store is closed. */
    void checkOpen(String operation) {
        if (closed.get()) {
            throw KVException.of(ErrorCode.CLOSED, "the store is closed").store(uri).operation(operation).build();
        }
    }

    @Override
    public long size(String key) {
        checkKey(key, "size");
        enter("size", key);
        try {
            return sizeOrMiss(key, "size");
        } finally {
            exit();
        }
    }

    @Override
    public boolean remove(String key) {
        checkKey(key, "remove");
        enter("remove", key);
        try {
            return removeWithLeasePolicy(key, "remove");
        } finally {
            exit();
        }
    }

    /**
     * Removes objects the caller has just read in full, with {@code force}: the caller's own {@code get_into} granted
     * each a lease ({@code default_kv_lease_ttl}, 10 s by default) that would otherwise hold the remove, and so the
     * consuming drop-select, for that long. A consuming reader is by contract the last reader of these objects; the
     * {@code lease-policy=} option still governs every other remove.
     */
    @Override
    public int removeConsumed(String[] keys, int count) {
        Objects.checkFromIndexSize(0, count, keys.length);
        for (int i = 0; i < count; i++) {
            checkKey(keys[i], "removeConsumed");
        }
        enter("removeConsumed", null);
        try {
            int removed = 0;
            for (int i = 0; i < count; i++) {
                int rc = lib.remove(client, keys[i], true);
                if (rc == 0) {
                    removed++;
                } else if (rc != RC_OBJECT_NOT_FOUND) {
                    throw MooncakeStatus.toException(rc, uri, "removeConsumed", keys[i], masterContext(rc));
                }
            }
            return removed;
        } finally {
            exit();
        }
    }

    @Override
    public void putBatch(String[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        Objects.checkFromIndexSize(0, count, Math.min(Math.min(keys.length, values.length), stored.length));
        Objects.requireNonNull(options, "options");
        for (int i = 0; i < count; i++) {
            checkKey(keys[i], "putBatch");
            Objects.requireNonNull(values[i], "values[" + i + "]");
            checkValueSize(keys[i], values[i]);
        }
        enter("putBatch", null);
        try {
            MooncakeStoreLibrary.Replication replication = replication(options);
            String[] chunkKeys = new String[pool.slots()];
            MemorySegment[] chunkBufs = new MemorySegment[pool.slots()];
            long[] chunkSizes = new long[pool.slots()];
            int[] chunkIndex = new int[pool.slots()];
            int[] results = new int[pool.slots()];
            MemorySegment[] slots = new MemorySegment[pool.slots()];
            int next = 0;
            while (next < count) {
                int n = 0;
                while (next < count && n < chunkKeys.length) {
                    int i = next++;
                    if (options.ifAbsent()) {
                        if (sizeOrMiss(keys[i], "putBatch") >= 0) {
                            stored[i] = false;
                            continue;
                        }
                    } else if (!options.immutable()) {
                        removeWithLeasePolicy(keys[i], "putBatch");
                    }
                    if (values[i].byteSize() <= 1 || (values[i].byteSize() > pool.slotBytes()
                            && !isRegistered(values[i]))) {
                        putValue(keys[i], values[i], replication);
                        stored[i] = true;
                        continue;
                    }
                    chunkKeys[n] = keys[i];
                    chunkIndex[n] = i;
                    n++;
                }
                if (n > 0) {
                    putChunk(chunkKeys, values, chunkBufs, chunkSizes, chunkIndex, results, slots, n, replication,
                            stored);
                }
            }
        } finally {
            exit();
        }
    }

    private void putChunk(String[] chunkKeys, MemorySegment[] values, MemorySegment[] bufs, long[] sizes,
                          int[] index, int[] results, MemorySegment[] slots, int n,
                          MooncakeStoreLibrary.Replication replication, boolean[] stored) {
        int staged = 0;
        for (int j = 0; j < n; j++) {
            MemorySegment v = values[index[j]];
            sizes[j] = v.byteSize();
            bufs[j] = isRegistered(v) ? v : null;
            staged += bufs[j] == null ? 1 : 0;
        }
        pool.acquire(slots, staged, closed::get, uri);
        try {
            int s = 0;
            for (int j = 0; j < n; j++) {
                if (bufs[j] == null) {
                    bufs[j] = slots[s++].asSlice(0, sizes[j]);
                    MemorySegment.copy(values[index[j]], 0, bufs[j], 0, sizes[j]);
                }
            }
            int rc = lib.batchPutFrom(client, chunkKeys, bufs, sizes, n, replication, results);
            if (rc != 0) {
                throw MooncakeStatus.toException(rc, uri, "putBatch", chunkKeys[0], n + " keys in the batch");
            }
            for (int j = 0; j < n; j++) {
                if (results[j] == RC_NO_AVAILABLE_HANDLE) {
                    putWithRetry(chunkKeys[j], bufs[j], replication, false);
                } else if (results[j] != 0 && results[j] != RC_OBJECT_ALREADY_EXISTS) {
                    throw MooncakeStatus.toException(results[j], uri, "putBatch", chunkKeys[j], null);
                }
                stored[index[j]] = true;
            }
        } finally {
            pool.release(slots, staged);
            Arrays.fill(bufs, 0, n, null);
        }
    }

    @Override
    public void getIntoBatch(String[] keys, MemorySegment[] dsts, int count, long[] results) {
        Objects.checkFromIndexSize(0, count, Math.min(Math.min(keys.length, dsts.length), results.length));
        for (int i = 0; i < count; i++) {
            checkKey(keys[i], "getIntoBatch");
            Objects.requireNonNull(dsts[i], "dsts[" + i + "]");
        }
        enter("getIntoBatch", null);
        try {
            int chunk = pool.slots();
            String[] chunkKeys = new String[chunk];
            MemorySegment[] bufs = new MemorySegment[chunk];
            long[] sizes = new long[chunk];
            long[] out = new long[chunk];
            MemorySegment[] slots = new MemorySegment[chunk];
            for (int start = 0; start < count; start += chunk) {
                int n = Math.min(chunk, count - start);
                int staged = 0;
                for (int j = 0; j < n; j++) {
                    MemorySegment dst = dsts[start + j];
                    chunkKeys[j] = keys[start + j];
                    bufs[j] = isRegistered(dst) ? dst : null;
                    sizes[j] = bufs[j] != null ? dst.byteSize() : Math.min(dst.byteSize(), pool.slotBytes());
                    staged += bufs[j] == null ? 1 : 0;
                }
                pool.acquire(slots, staged, closed::get, uri);
                try {
                    int s = 0;
                    for (int j = 0; j < n; j++) {
                        if (bufs[j] == null) {
                            bufs[j] = slots[s++];
                        }
                    }
                    int rc = lib.batchGetInto(client, chunkKeys, bufs, sizes, n, out);
                    if (rc != 0) {
                        throw MooncakeStatus.toException(rc, uri, "getIntoBatch", chunkKeys[0],
                                n + " keys in the batch");
                    }
                    for (int j = 0; j < n; j++) {
                        MemorySegment dst = dsts[start + j];
                        long r = out[j] >= 0 ? logicalSize(chunkKeys[j], out[j]) : out[j];
                        if (r >= 0 && bufs[j] != dst) {
                            MemorySegment.copy(bufs[j], 0, dst, 0, r);
                        }
                        results[start + j] = r >= 0 ? r : getFailure(chunkKeys[j], r, dst);
                    }
                } finally {
                    pool.release(slots, staged);
                    Arrays.fill(bufs, 0, n, null);
                }
            }
        } finally {
            exit();
        }
    }

    /**
     * Removes every key that matches {@code regex} (ECMAScript syntax in the real store; the test double uses POSIX
     * extended syntax), honouring the lease policy: with {@link LeasePolicy#WAIT} leased objects stay.
     *
     * @return how many objects were removed
     */
    public long removeMatching(String regex) {
        Objects.requireNonNull(regex, "regex");
        enter("removeMatching", null);
        try {
            long r = lib.removeByRegex(client, regex, config.leasePolicy() == LeasePolicy.FORCE);
            if (r < 0) {
                throw MooncakeStatus.toException(r, uri, "removeMatching", null, "pattern " + regex);
            }
            return r;
        } finally {
            exit();
        }
    }

    /**
     * Removes every object of the pool (not only this client's), honouring the lease policy.
     *
     * @return how many objects were removed
     */
    public long removeAll() {
        enter("removeAll", null);
        try {
            long r = lib.removeAll(client, config.leasePolicy() == LeasePolicy.FORCE);
            if (r < 0) {
                throw MooncakeStatus.toException(r, uri, "removeAll", null, null);
            }
            return r;
        } finally {
            exit();
        }
    }

    @Override
    public String healthCheck() {
        enter("healthCheck", null);
        try {
            int rc = lib.healthCheck(client);
            return switch (rc) {
                case 0 -> uri + " healthy: client " + clientHostname + ", master " + config.masterServerAddress();
                case 2 -> throw KVException.of(ErrorCode.STORE_UNREACHABLE, "the master "
                                + config.masterServerAddress() + " is unreachable")
                        .store(uri).operation("healthCheck").nativeCode(rc)
                        .hint("is mooncake_master running at " + config.masterServerAddress()
                                + ", and is that port open from this host?").build();
                case 1 -> throw KVException.of(ErrorCode.INTERNAL, "the native client reports it is not set up")
                        .store(uri).operation("healthCheck").nativeCode(rc).build();
                default -> throw MooncakeStatus.toException(rc, uri, "healthCheck", null, null);
            };
        } finally {
            exit();
        }
    }

    @Override
    public void register(MemorySegment segment) {
        Objects.requireNonNull(segment, "segment");
        enter("register", null);
        try {
            if (!segment.isNative() || segment.byteSize() == 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "only a non-empty native segment can be registered; "
                        + "got " + (segment.isNative() ? "0 bytes" : "a heap segment")).store(uri)
                        .operation("register").build();
            }
            int rc = lib.registerBuffer(client, segment, segment.byteSize());
            if (rc != 0) {
                String range = describe(segment.address(), segment.byteSize());
                Map.Entry<Long, Long> other = overlapping(segment.address(), segment.byteSize());
                if (other == null && rc != RC_INVALID_PARAMS) {
                    throw MooncakeStatus.toException(rc, uri, "register", null, range);
                }
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, (other != null ? range + " overlaps the registered "
                                + describe(other.getKey(), other.getValue()) : range + " was refused")
                                + " (" + MooncakeStatus.describe(rc) + ")")
                        .store(uri).operation("register").nativeCode(rc)
                        .hint("register each range once and never overlapping ranges; unregister before "
                                + "re-registering").build();
            }
            registeredRanges.put(segment.address(), segment.byteSize());
            callerRanges.put(segment.address(), segment.byteSize());
        } finally {
            exit();
        }
    }

    @Override
    public void unregister(MemorySegment segment) {
        Objects.requireNonNull(segment, "segment");
        enter("unregister", null);
        try {
            Long length = callerRanges.get(segment.address());
            if (length == null || length != segment.byteSize()) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, describe(segment.address(), segment.byteSize())
                                + " was not registered through this store").store(uri).operation("unregister")
                        .hint("unregister the same segment (address and size) that was registered").build();
            }
            int rc = lib.unregisterBuffer(client, segment);
            if (rc != 0) {
                throw MooncakeStatus.toException(rc, uri, "unregister", null,
                        describe(segment.address(), segment.byteSize()));
            }
            callerRanges.remove(segment.address());
            registeredRanges.remove(segment.address());
        } finally {
            exit();
        }
    }

    /** Ranges registered through {@link #register} and not yet released; 0 after {@link #close()}. */
    int callerRegistrations() {
        return callerRanges.size();
    }

    /** Bytes in ranges registered through {@link #register} and not yet released. */
    long callerRegisteredBytes() {
        return callerRanges.values().stream().mapToLong(Long::longValue).sum();
    }

    /** Staging slots free now; all of them whenever no call is in flight and no claim or view is held. */
    int freeStagingSlots() {
        return pool.available();
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        long deadline = System.nanoTime() + CLOSE_DRAIN_MILLIS * 1_000_000;
        while (inFlight.get() != 0) {
            if (System.nanoTime() > deadline) {
                // Destroying the client under a running call could crash the JVM; leaking it cannot.
                LOG.error("{}: {} calls still running after {} ms; the native client is left undestroyed", uri,
                        inFlight.get(), CLOSE_DRAIN_MILLIS);
                return;
            }
            LockSupport.parkNanos(CLOSE_POLL_NANOS);
        }
        for (Long address : callerRanges.keySet()) {
            unregisterQuietly(address);
        }
        callerRanges.clear();
        unregisterQuietly(staging.address());
        registeredRanges.clear();
        clientArena.close();
        stagingArena.close();
        LIVE_STORES.decrementAndGet();
        LOG.info("Closed {}", uri);
    }

    private void unregisterQuietly(long address) {
        int rc = lib.unregisterBuffer(client, MemorySegment.ofAddress(address));
        if (rc != 0) {
            LOG.warn("{}: unregistering 0x{} returned {}", uri, Long.toHexString(address),
                    MooncakeStatus.describe(rc));
        }
    }

    private void enter(String operation, String key) {
        inFlight.incrementAndGet();
        if (closed.get()) {
            inFlight.decrementAndGet();
            throw KVException.of(ErrorCode.CLOSED, "the store is closed").store(uri).operation(operation).key(key)
                    .build();
        }
    }

    private void exit() {
        inFlight.decrementAndGet();
    }

    private long sizeOrMiss(String key, String operation) {
        long r = lib.getSize(client, key);
        if (r >= 0) {
            return logicalSize(key, r);
        }
        if (r == RC_OBJECT_NOT_FOUND) {
            return GetResult.MISS;
        }
        throw MooncakeStatus.toException(r, uri, operation, key, masterContext(r));
    }

    /**
     * Answers a failed {@code get_into}: a miss, too-small with the object's size, or, for an object larger than a
     * staging slot going to unregistered native memory, a second try with the destination registered for the call.
     */
    private long getFailure(String key, long r, MemorySegment dst) {
        if (r == RC_OBJECT_NOT_FOUND || r == RC_REPLICA_NOT_READY) {
            return GetResult.MISS;
        }
        if (r == RC_INVALID_PARAMS) {
            long size = sizeOrMiss(key, "getInto");
            if (size < 0) {
                return GetResult.MISS;
            }
            if (size == 0) {
                return 0;
            }
            if (size > dst.byteSize()) {
                return GetResult.tooSmall(size);
            }
            if (size > pool.slotBytes() && !isRegistered(dst)) {
                return getIntoTemporarilyRegistered(key, dst, size);
            }
        }
        throw MooncakeStatus.toException(r, uri, "getInto", key, masterContext(r));
    }

    /** Registration costs (RDMA pins pages), so this path is for objects that outgrow a staging slot only. */
    private long getIntoTemporarilyRegistered(String key, MemorySegment dst, long size) {
        if (!dst.isNative() || lib.registerBuffer(client, dst, dst.byteSize()) != 0) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "the object has " + size + " bytes, more than a staging "
                            + "slot of " + pool.slotBytes() + " bytes, and the destination ("
                            + (dst.isNative() ? "overlapping a registered range" : "a heap segment")
                            + ") cannot be registered for the call")
                    .store(uri).operation("getInto").key(key)
                    .hint("register the destination memory (RegisteredMemory.register) for zero copy, or raise "
                            + "staging= / lower staging-slots=").build();
        }
        long r;
        try {
            r = lib.getInto(client, key, dst, dst.byteSize());
        } finally {
            unregisterQuietly(dst.address());
        }
        if (r >= 0) {
            return r;
        }
        if (r == RC_OBJECT_NOT_FOUND || r == RC_REPLICA_NOT_READY) {
            return GetResult.MISS;
        }
        if (r == RC_INVALID_PARAMS) {
            // The object was replaced by a larger one between the size check and this call.
            long now = sizeOrMiss(key, "getInto");
            return now < 0 ? GetResult.MISS : GetResult.tooSmall(now);
        }
        throw MooncakeStatus.toException(r, uri, "getInto", key, masterContext(r));
    }

    /**
     * Puts with {@code put_from}, or with {@code put} (a copy through the client's local buffer) when
     * {@code throughLocalBuffer}, retrying while the pool is full.
     */
    private void putWithRetry(String key, MemorySegment src, MooncakeStoreLibrary.Replication replication,
                              boolean throughLocalBuffer) {
        long backoff = Math.max(1, config.fullBackoffMillis());
        long waited = 0;
        for (int attempt = 0; ; attempt++) {
            int rc = throughLocalBuffer ? lib.put(client, key, src, src.byteSize(), replication)
                    : lib.putFrom(client, key, src, src.byteSize(), replication);
            if (rc == 0 || rc == RC_OBJECT_ALREADY_EXISTS) {
                return;
            }
            if (rc != RC_NO_AVAILABLE_HANDLE || attempt >= config.fullRetries()) {
                String context = rc == RC_NO_AVAILABLE_HANDLE
                        ? "a value of " + src.byteSize() + " bytes; retried " + attempt + " times over " + waited
                        + " ms (full-retries=, full-backoff=)"
                        : masterContext(rc);
                throw MooncakeStatus.toException(rc, uri, "put", key, context);
            }
            pause(backoff, "put", key);
            waited += backoff;
            backoff = Math.min(backoff * 2, MAX_BACKOFF_MILLIS);
        }
    }

    /** Removes {@code key} under the lease policy; returns whether it existed. */
    private boolean removeWithLeasePolicy(String key, String operation) {
        boolean force = config.leasePolicy() == LeasePolicy.FORCE;
        long start = System.nanoTime();
        long poll = 1;
        while (true) {
            int rc = lib.remove(client, key, force);
            if (rc == 0) {
                return true;
            }
            if (rc == RC_OBJECT_NOT_FOUND) {
                return false;
            }
            long waitedMillis = (System.nanoTime() - start) / 1_000_000;
            boolean retryable = rc == RC_OBJECT_HAS_LEASE || rc == RC_REPLICA_NOT_READY;
            if (!retryable || waitedMillis >= config.leaseWaitMillis()) {
                throw MooncakeStatus.toException(rc, uri, operation, key, retryable
                        ? "waited " + waitedMillis + " ms (lease-wait=" + config.leaseWaitMillis() + "ms)"
                        : masterContext(rc));
            }
            if (closed.get()) {
                throw KVException.of(ErrorCode.CLOSED, "the store closed while waiting for a lease to end")
                        .store(uri).operation(operation).key(key).build();
            }
            pause(poll, operation, key);
            poll = Math.min(poll * 2, MAX_LEASE_POLL_MILLIS);
        }
    }

    private void pause(long millis, String operation, String key) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw KVException.of(ErrorCode.BUSY, "interrupted while waiting to retry").store(uri)
                    .operation(operation).key(key).cause(e).build();
        }
    }

    private MooncakeStoreLibrary.Replication replication(PutOptions options) {
        int replicas = options.replicas() == 1 ? config.replicas() : options.replicas();
        return new MooncakeStoreLibrary.Replication(replicas, options.pin() == Pin.SOFT, options.pin() == Pin.HARD,
                List.of());
    }

    private boolean isRegistered(MemorySegment s) {
        if (!s.isNative() || s.byteSize() == 0) {
            return false;
        }
        Map.Entry<Long, Long> e = registeredRanges.floorEntry(s.address());
        return e != null && s.address() - e.getKey() <= e.getValue() - s.byteSize();
    }

    private Map.Entry<Long, Long> overlapping(long address, long length) {
        for (Map.Entry<Long, Long> e : registeredRanges.entrySet()) {
            if (address < e.getKey() + e.getValue() && e.getKey() < address + length) {
                return e;
            }
        }
        return null;
    }

    /** Refuses, before anything is removed, a value that no path can move. */
    private void checkValueSize(String key, MemorySegment value) {
        long n = value.byteSize();
        if (n <= pool.slotBytes() || isRegistered(value)) {
            return;
        }
        if (!value.isNative() || n > config.localBufferBytes()) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "a value of " + n + " bytes in unregistered "
                            + (value.isNative() ? "memory" : "heap memory") + " exceeds a staging slot of "
                            + pool.slotBytes() + " bytes" + (value.isNative() ? " and the client's local buffer of "
                            + config.localBufferBytes() + " bytes" : ""))
                    .store(uri).operation("put").key(key)
                    .hint("register the value's memory (RegisteredMemory.register) for zero copy, raise staging= "
                            + "(or lower staging-slots=), or raise buffer=").build();
        }
    }

    private void checkKey(String key, String operation) {
        if (key == null || key.isEmpty() || key.indexOf('\0') >= 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, key == null ? "a null key" : key.isEmpty()
                            ? "an empty key" : "a key with a NUL character, which C strings cannot carry")
                    .store(uri).operation(operation).key(key).build();
        }
    }

    private String masterContext(long rc) {
        return rc == -900 || rc == -901 ? "master " + config.masterServerAddress() : null;
    }

    private String setupContext() {
        return "master " + config.masterServerAddress() + ", metadata " + withoutPassword(config.metadataServer())
                + ", local_hostname " + config.localHostname() + ", protocol " + config.protocol()
                + (config.deviceName().isEmpty() ? "" : ", device " + config.deviceName());
    }

    /** A metadata address such as {@code redis://user:secret@h:6379} may carry a password: never show it. */
    static String withoutPassword(String address) {
        return StoreUri.maskRaw(address);
    }

    private static String describe(long address, long length) {
        return "range 0x" + Long.toHexString(address) + "+" + length + " bytes";
    }
}
