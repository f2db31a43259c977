package dev.kvconnector.store.memory;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.memory.KeptBlocks;
import dev.kvconnector.memory.NativeMemory;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-process, off-heap store behind {@code memory:?capacity=2GiB&ttl=10m&eviction=lru|refuse}.
 *
 * <p>Values live in native memory from {@link NativeMemory}; capacity (bytes of values) is a hard bound, kept by
 * evicting least-recently-used entries, or by refusing the put with {@code STORE_FULL} when {@code eviction=refuse}.
 * Reads copy straight from the stored memory into the caller's segment. A reader holds a reference to the entry
 * while it copies, so a concurrent remove or eviction frees the memory only after the copy ends.
 *
 * <p>The lock guards only the index and the LRU order ({@link LruIndex}, which makes no object per value); copies
 * run outside it, so readers and writers of different keys proceed in parallel.
 *
 * <p>Keys are indexed as {@link StoreKey} bytes: each entry keeps a copy of its key in a key of its own, reused with
 * the entry, so the {@code StoreKey} methods allocate nothing even for keys the store has never seen. Each
 * {@code String} method encodes its key into a key of the calling thread's and takes the {@code StoreKey} path, so
 * the string {@code s} and {@code StoreKey.of(s)} name the same object. Errors name the key as text.
 *
 * <p>Values of 64 KiB and more live in blocks rounded up to a size class (four classes per power of two, so at most
 * 25% slack, counted against the capacity), smaller ones in blocks of their exact size, and a freed block is kept,
 * with its entry, for the next value of its class while the capacity allows. A steady stream of same-sized layers
 * then reuses memory whose pages are already mapped, instead of faulting in fresh pages on every put (on the
 * project's machines a fresh 4 MiB costs about 1024 page faults), and a stream of small values (manifests) makes no
 * entry per value.
 *
 * <p>Zero-copy: the store declares {@link StoreCapability#CLAIM} and {@link StoreCapability#VIEW}. A claim
 * ({@link MemoryClaim}) reserves a block against the capacity at once and publishes it on commit; a view
 * ({@link MemoryView}) holds a reference to the entry like a reader's copy does, so its bytes outlive a remove,
 * replace or eviction until the release. Every block is tied to one shared arena that {@link #close()} closes
 * before it frees memory: a claim or view segment used after the close throws {@link IllegalStateException}
 * instead of touching freed memory.
 *
 * <p>Over 400 lines because the index, the LRU order, the capacity count, kept blocks and open claims share one
 * lock and one accounting; the claim and view handles live in their own classes.
 */
public final class MemoryStore implements KVStore {
    /** Default capacity: 1 GiB. */
    public static final long DEFAULT_CAPACITY = 1L << 30;
    static final Set<String> OPTIONS = Set.of("capacity", "ttl", "eviction");

    private static final AtomicLong LIVE_STORES = new AtomicLong();
    /** Where a {@code String} method encodes its key, one per thread, used only during that call. */
    private static final ThreadLocal<StoreKey> TEXT_KEY = ThreadLocal.withInitial(StoreKey::new);
    private final String uri;
    private final long capacity;
    private final long defaultTtlMillis;
    private final boolean evict;
    private final ReentrantLock lock = new ReentrantLock();
    private final LruIndex<Entry> index = new LruIndex<>();
    private final KeptBlocks<Entry> freeBlocks = new KeptBlocks<>(Entry::blockBytes);
    /** Kept blocks that {@link #tryReserve} gave up, to be freed outside the lock; guarded by the lock. */
    private final List<Entry> freeLater = new ArrayList<>();
    private final Set<MemoryClaim> openClaims = Collections.newSetFromMap(new IdentityHashMap<>());
    /** The scope of every block: closed by {@link #close()} before any block is freed. */
    private final Arena scope = Arena.ofShared();
    private long reservedBytes;
    private volatile boolean closed;

    /**
     * A block and the value it holds; the index holds one reference, each reader, view or open claim one more. At
     * zero references the block is freed or kept, with this entry and its slices, for the next value of its size
     * ({@link KeptBlocks}), so that a steady stream of same-sized values makes no object.
     */
    final class Entry extends LruIndex.Node<Entry> {
        private static final VarHandle REFS;

        static {
            try {
                REFS = MethodHandles.lookup().findVarHandle(Entry.class, "refs", int.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        final MemorySegment block;
        /** The value: the block's first bytes. Set by {@link #prepare} before the entry is published. */
        MemorySegment data;
        MemorySegment readOnly;
        long expiresAtNanos;
        /** References, through {@link #REFS}: an int field rather than an {@code AtomicInteger} per value. */
        @SuppressWarnings("unused")
        private volatile int refs;

        Entry(MemorySegment block) {
            this.block = block;
        }

        long blockBytes() {
            return block.byteSize();
        }

        /** Readies this entry for a new value of {@code size} bytes, with one reference: its owner's. */
        Entry prepare(long size, long expires) {
            if (data == null || data.byteSize() != size) {
                data = block.asSlice(0, size);
                readOnly = data.asReadOnly();
            }
            expiresAtNanos = expires;
            REFS.setRelease(this, 1);
            return this;
        }

        void retain() {
            REFS.getAndAdd(this, 1);
        }

        boolean expired(long now) {
            return expiresAtNanos != 0 && now - expiresAtNanos >= 0;
        }

        void release() {
            if ((int) REFS.getAndAdd(this, -1) == 1) {
                releaseBlock(this);
            }
        }
    }

    private MemoryStore(String uri, long capacity, long defaultTtlMillis, boolean evict) {
        this.uri = uri;
        this.capacity = capacity;
        this.defaultTtlMillis = defaultTtlMillis;
        this.evict = evict;
        LIVE_STORES.incrementAndGet();
    }

    /** Stores opened and not yet closed in this process: for leak checks (an open store holds a shared arena). */
    public static long liveStores() {
        return LIVE_STORES.get();
    }

    /** Opens a store from a parsed {@code memory:} URI. */
    public static MemoryStore open(StoreUri uri) {
        uri.requireKnownParams(OPTIONS).requireNoUserInfo();
        if (!uri.hosts().isEmpty() || !uri.path().isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_URI, "a memory: store takes no host or path, only options")
                    .store(uri.masked()).hint("write memory:?capacity=2GiB").build();
        }
        long capacity = uri.sizeParam("capacity", DEFAULT_CAPACITY);
        if (capacity <= 0) {
            throw KVException.of(ErrorCode.INVALID_URI, "capacity must be positive").store(uri.masked()).build();
        }
        String eviction = uri.params().getOrDefault("eviction", "lru");
        if (!eviction.equals("lru") && !eviction.equals("refuse")) {
            throw KVException.of(ErrorCode.INVALID_URI, "eviction=" + eviction + " is neither lru nor refuse")
                    .store(uri.masked()).build();
        }
        return new MemoryStore(uri.masked(), capacity, uri.durationMillisParam("ttl", 0), eviction.equals("lru"));
    }

    /** Opens a store with the given capacity in bytes, LRU eviction and no TTL. */
    public static MemoryStore withCapacity(long capacityBytes) {
        return open(StoreUri.parse("memory:?capacity=" + capacityBytes));
    }

    @Override
    public String uri() {
        return uri;
    }

    @Override
    public Set<StoreCapability> capabilities() {
        return EnumSet.of(StoreCapability.NATIVE_TTL, StoreCapability.LOCAL_MEMORY, StoreCapability.REMOVE,
                StoreCapability.CLAIM, StoreCapability.VIEW);
    }

    /** The capacity in bytes. */
    public long capacity() {
        return capacity;
    }

    /** Bytes of values held, including values whose removal waits for a reader or view, and open claims. */
    public long usedBytes() {
        lock.lock();
        try {
            return reservedBytes;
        } finally {
            lock.unlock();
        }
    }

    /** The number of live keys. */
    public int count() {
        lock.lock();
        try {
            return index.size();
        } finally {
            lock.unlock();
        }
    }

    /** {@code key} encoded into the calling thread's key, for the length of one call. */
    private static StoreKey bytesOf(String key) {
        return TEXT_KEY.get().set(key);
    }

    @Override
    public boolean put(String key, MemorySegment value, PutOptions options) {
        return put(bytesOf(key), value, options);
    }

    @Override
    public boolean put(StoreKey key, MemorySegment value, PutOptions options) {
        checkOpen("put", key);
        long size = value.byteSize();
        checkFits(size, "put", key);
        long expires = expiresAt(options);
        long blockBytes = blockSize(size);
        Entry block;
        List<Entry> toFree = List.of();
        lock.lock();
        try {
            if (options.ifAbsent() && liveEntry(key, System.nanoTime()) != null) {
                return false;
            }
            block = takeAndReserve(blockBytes);
            toFree = drainFreeLater();
        } finally {
            lock.unlock();
            freeAll(toFree);
        }
        if (block == full) {
            throw KVException.of(ErrorCode.STORE_FULL, "no room for " + blockBytes + " bytes: " + usedBytes() + " of "
                    + capacity + " bytes in use" + (evict ? ", held by readers, views or open claims" : ""))
                    .store(uri).operation("put").key(key.toString())
                    .hint(evict ? "raise capacity= or wait for readers" : "eviction=refuse is set: remove entries, "
                            + "use TTLs, or raise capacity=").build();
        }
        if (block == null) {
            block = allocateBlock(blockBytes, "put", key);
        }
        block.prepare(size, expires);
        try {
            MemorySegment.copy(value, 0, block.data, 0, size);
        } catch (IllegalStateException closedMidCopy) {
            block.release();
            throw closed ? closedError("put", key) : closedMidCopy;
        }
        return publish(key, block, options.ifAbsent(), "put");
    }

    /** Puts {@code fresh} into the index under a copy of {@code key}, or frees it (store closed, or if-absent lost). */
    boolean publish(StoreKey key, Entry fresh, boolean ifAbsent, String op) {
        Entry old;
        boolean stored;
        lock.lock();
        try {
            stored = !closed && !(ifAbsent && liveEntry(key, System.nanoTime()) != null);
            old = stored ? index.put(key, fresh) : fresh;
        } finally {
            lock.unlock();
        }
        if (old != null) {
            old.release();
        }
        if (!stored) {
            checkOpen(op, key);
        }
        return stored;
    }

    /** A claim handle for this store. */
    @Override
    public StoreClaim newClaim() {
        checkOpen("newClaim", null);
        return new MemoryClaim(this);
    }

    @Override
    public int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        return tryClaim(bytesOf(key), bytes, options, claim);
    }

    @Override
    public int tryClaim(StoreKey key, long bytes, PutOptions options, StoreClaim claim) {
        checkOpen("tryClaim", key);
        MemoryClaim c = MemoryClaim.ownedBy(this, claim, key);
        if (bytes < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot claim " + bytes + " bytes").store(uri)
                    .operation("tryClaim").key(key.toString()).build();
        }
        checkFits(bytes, "tryClaim", key);
        long blockBytes = blockSize(bytes);
        Entry block;
        List<Entry> toFree = List.of();
        lock.lock();
        try {
            if (options.ifAbsent() && liveEntry(key, System.nanoTime()) != null) {
                return ClaimResult.EXISTS;
            }
            block = takeAndReserve(blockBytes);
            toFree = drainFreeLater();
        } finally {
            lock.unlock();
            freeAll(toFree);
        }
        if (block == full) {
            return ClaimResult.FULL;
        }
        if (block == null) {
            block = allocateBlock(blockBytes, "tryClaim", key);
        }
        lock.lock();
        try {
            if (!closed) {
                c.hold(key, block.prepare(bytes, expiresAt(options)), options.ifAbsent());
                openClaims.add(c);
                return ClaimResult.CLAIMED;
            }
        } finally {
            lock.unlock();
        }
        releaseBlock(block);
        throw closedError("tryClaim", key);
    }

    /** Takes {@code claim} out of the open claims; false when the store's close already took (and freed) it. */
    boolean closeClaim(MemoryClaim claim) {
        lock.lock();
        try {
            return openClaims.remove(claim);
        } finally {
            lock.unlock();
        }
    }

    /** A view handle for this store. */
    @Override
    public StoreView newView() {
        checkOpen("newView", null);
        return new MemoryView(this);
    }

    @Override
    public long tryView(String key, StoreView view) {
        return tryView(bytesOf(key), view);
    }

    @Override
    public long tryView(StoreKey key, StoreView view) {
        checkOpen("tryView", key);
        MemoryView v = MemoryView.ownedBy(this, view, key);
        Entry e = retain(key, "tryView");
        if (e == null) {
            return GetResult.MISS;
        }
        v.hold(e);
        return e.data.byteSize();
    }

    private void checkFits(long size, String op, StoreKey key) {
        if (size > capacity) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, size + " bytes exceed the store's capacity of " + capacity
                    + " bytes").store(uri).operation(op).key(key.toString()).hint("raise capacity= in the store URI")
                    .build();
        }
    }

    private long expiresAt(PutOptions options) {
        long ttl = options.ttlMillis() > 0 ? options.ttlMillis() : defaultTtlMillis;
        return ttl > 0 ? nonZero(System.nanoTime() + ttl * 1_000_000L) : 0;
    }

    /** Marks "no room" from {@link #takeAndReserve}; never freed, prepared or published. */
    private final Entry full = new Entry(MemorySegment.NULL);

    /**
     * Reserves a block of {@code blockBytes}: a kept one, or null for the caller to allocate, or {@link #full}
     * (nothing reserved). Caller holds the lock.
     */
    private Entry takeAndReserve(long blockBytes) {
        Entry block = freeBlocks.take(blockBytes);
        if (block != null) {
            reservedBytes += blockBytes;
            return block;
        }
        return tryReserve(blockBytes) ? null : full;
    }

    /** The blocks in {@link #freeLater}, which it empties; an empty list without allocating. Caller holds the lock. */
    private List<Entry> drainFreeLater() {
        if (freeLater.isEmpty()) {
            return List.of();
        }
        List<Entry> out = List.copyOf(freeLater);
        freeLater.clear();
        return out;
    }

    /** Frees the blocks {@link #drainFreeLater} gave up; allocation-free when there are none. */
    private static void freeAll(List<Entry> blocks) {
        if (!blocks.isEmpty()) {
            blocks.forEach(MemoryStore::freeBlock);
        }
    }

    /** Allocates a block tied to the store's scope; on failure the reservation is returned. */
    @SuppressWarnings("restricted")
    private Entry allocateBlock(long blockBytes, String op, StoreKey key) {
        MemorySegment raw;
        try {
            raw = NativeMemory.allocate(blockBytes);
        } catch (RuntimeException e) {
            unreserve(blockBytes);
            throw e;
        }
        try {
            return new Entry(raw.reinterpret(scope, null));
        } catch (IllegalStateException closedMeanwhile) {
            NativeMemory.free(raw);
            unreserve(blockBytes);
            throw closedError(op, key);
        }
    }

    /** Frees an entry's block, also after its scope closed (free takes the address alone). */
    @SuppressWarnings("restricted")
    private static void freeBlock(Entry entry) {
        NativeMemory.free(MemorySegment.ofAddress(entry.block.address()).reinterpret(entry.block.byteSize()));
    }

    private static long nonZero(long t) {
        return t == 0 ? 1 : t;
    }

    /** The block a value of {@code size} bytes occupies: exact below 64 KiB, else the next of 4 classes per power of two. */
    private long blockSize(long size) {
        if (size < KeptBlocks.MIN_BYTES) {
            return size;
        }
        long step = Long.highestOneBit(size) / 4;
        long block = (size + step - 1) / step * step;
        return block <= capacity ? block : size;
    }

    /** Returns an entry's block to the capacity: kept for reuse, with the entry, while it fits, else freed. */
    void releaseBlock(Entry block) {
        long size = block.blockBytes();
        boolean keep;
        lock.lock();
        try {
            reservedBytes -= size;
            keep = !closed && reservedBytes + freeBlocks.bytes() + size <= capacity;
            if (keep) {
                freeBlocks.keep(block);
            }
        } finally {
            lock.unlock();
        }
        if (!keep) {
            freeBlock(block);
        }
    }

    /**
     * Makes room for {@code size} more bytes and reserves them: kept free blocks go first, then (with LRU eviction)
     * the least recently used entries. Reserved plus kept bytes never pass the capacity. Caller holds the lock;
     * kept blocks given up go into {@link #freeLater}, for the caller to free after unlocking.
     *
     * @return false when there is no room (nothing reserved)
     */
    private boolean tryReserve(long size) {
        if (reservedBytes + freeBlocks.bytes() + size > capacity) {
            purgeExpired();
        }
        while (reservedBytes + freeBlocks.bytes() + size > capacity) {
            if (freeBlocks.bytes() > 0) {
                freeLater.add(freeBlocks.dropOne());
            } else if (evict && index.eldest() != null) {
                Entry victim = index.eldest();
                index.remove(victim);
                victim.release();
            } else {
                return false;
            }
        }
        reservedBytes += size;
        return true;
    }

    private void unreserve(long size) {
        lock.lock();
        try {
            reservedBytes -= size;
        } finally {
            lock.unlock();
        }
    }

    private void purgeExpired() {
        long now = System.nanoTime();
        for (Entry e = index.eldest(); e != null; ) {
            Entry next = index.newer(e);
            if (e.expired(now)) {
                index.remove(e);
                e.release();
            }
            e = next;
        }
    }

    /** The live entry for key, now the most recently used; removed when expired. Caller holds the lock. */
    private Entry liveEntry(StoreKey key, long now) {
        Entry e = index.get(key);
        if (e == null) {
            return null;
        }
        if (e.expired(now)) {
            index.remove(e);
            e.release();
            return null;
        }
        index.touch(e);
        return e;
    }

    private Entry retain(StoreKey key, String op) {
        checkOpen(op, key);
        lock.lock();
        try {
            if (closed) {
                throw closedError(op, key);
            }
            Entry e = liveEntry(key, System.nanoTime());
            if (e != null) {
                e.retain();
            }
            return e;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        return getInto(bytesOf(key), dst);
    }

    @Override
    public long getInto(StoreKey key, MemorySegment dst) {
        Entry e = retain(key, "getInto");
        if (e == null) {
            return GetResult.MISS;
        }
        try {
            long size = e.data.byteSize();
            if (dst.byteSize() < size) {
                return GetResult.tooSmall(size);
            }
            MemorySegment.copy(e.data, 0, dst, 0, size);
            return size;
        } catch (IllegalStateException closedMidCopy) {
            throw closed ? closedError("getInto", key) : closedMidCopy;
        } finally {
            e.release();
        }
    }

    @Override
    public void putBatch(StoreKey[] keys, MemorySegment[] values, int count, PutOptions options, boolean[] stored) {
        for (int i = 0; i < count; i++) {
            stored[i] = put(keys[i], values[i], options);
        }
    }

    @Override
    public void getIntoBatch(StoreKey[] keys, MemorySegment[] dsts, int count, long[] results) {
        for (int i = 0; i < count; i++) {
            results[i] = getInto(keys[i], dsts[i]);
        }
    }

    @Override
    public long size(String key) {
        StoreKey k = bytesOf(key);
        checkOpen("size", k);
        lock.lock();
        try {
            Entry e = liveEntry(k, System.nanoTime());
            return e == null ? -1 : e.data.byteSize();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean remove(String key) {
        return removeKey(bytesOf(key));
    }

    @Override
    public int removeConsumed(StoreKey[] keys, int count) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (removeKey(keys[i])) {
                n++;
            }
        }
        return n;
    }

    private boolean removeKey(StoreKey key) {
        checkOpen("remove", key);
        Entry e;
        lock.lock();
        try {
            e = liveEntry(key, System.nanoTime());
            if (e != null) {
                index.remove(e);
            }
        } finally {
            lock.unlock();
        }
        if (e != null) {
            e.release();
        }
        return e != null;
    }

    @Override
    public String healthCheck() {
        checkOpen("healthCheck", null);
        return uri + " holds " + count() + " keys, " + usedBytes() + " of " + capacity + " bytes used";
    }

    /** Throws {@code CLOSED} naming {@code op} and {@code key} (or no key: null) once the store is closed. */
    void checkOpen(String op, StoreKey key) {
        if (closed) {
            throw closedError(op, key);
        }
    }

    KVException closedError(String op, StoreKey key) {
        return KVException.of(ErrorCode.CLOSED, "the store is closed").store(uri).operation(op)
                .key(key == null ? null : key.toString()).build();
    }

    /** Whether {@link #close()} has begun. */
    boolean isClosed() {
        return closed;
    }

    /**
     * Frees every value and open claim, after closing the scope of every block: a claim or view segment used
     * later throws {@link IllegalStateException}. Values under a view are freed when the view is released.
     */
    @Override
    public void close() {
        List<Entry> entries = new ArrayList<>();
        MemoryClaim[] claims;
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            index.drainTo(entries);
            claims = openClaims.toArray(new MemoryClaim[0]);
            openClaims.clear();
        } finally {
            lock.unlock();
        }
        scope.close();
        LIVE_STORES.decrementAndGet();
        for (Entry e : entries) {
            e.release();
        }
        for (MemoryClaim c : claims) {
            releaseBlock(c.dropAtClose());
        }
        List<Entry> kept = new ArrayList<>();
        lock.lock();
        try {
            freeBlocks.drainTo(kept);
        } finally {
            lock.unlock();
        }
        kept.forEach(MemoryStore::freeBlock);
    }
}
