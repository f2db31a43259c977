package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Collections;
import java.util.EnumSet;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code shm:} store: byte objects in a memory-mapped file that any number of processes on one host open at
 * once, exchanging values at memory speed with no server.
 *
 * <p>URI: {@code shm:/NAME?capacity=4GiB&dir=/dev/shm&entries=65536&block=4KiB&ttl=0}
 * <ul>
 *   <li>{@code NAME}: the file name, {@code [A-Za-z0-9._-]}, 1 to 200 characters.</li>
 *   <li>{@code capacity}: payload bytes (default 1 GiB), a hard bound; the file is that plus the tables. On
 *       tmpfs the file is sparse: pages are taken as values are written.</li>
 *   <li>{@code dir}: the directory (default {@code /dev/shm}).</li>
 *   <li>{@code entries}: most objects held at once (default capacity / 64 KiB, within 1024 and 2^24).</li>
 *   <li>{@code block}: allocation unit in bytes (default 4 KiB; a power of two from 64 B to 16 MiB). Each value
 *       takes whole blocks.</li>
 *   <li>{@code ttl}: time to live of puts that carry none (default 0, forever).</li>
 *   <li>{@code eviction}: {@code lru} (default; approximated by CLOCK) evicts committed entries to make room;
 *       {@code refuse} fails such puts with {@code STORE_FULL} instead. A setting of this process's puts, not of
 *       the file.</li>
 *   <li>{@code lock-timeout}: how long a call waits for the store lock held by a live process before it fails
 *       with {@code TIMEOUT} (default 30 s); a dead holder is taken over within milliseconds.</li>
 * </ul>
 * The first opener creates the file (mode 0600, published atomically, so no one sees it half-written); later
 * openers adopt its sizes, and fail when their URI names different ones.
 *
 * <p>Keys are up to {@value #MAX_KEY_BYTES} UTF-8 bytes. When the store is full, a put evicts committed, unleased
 * entries in CLOCK order: recently read entries get a second chance, expired ones do not.
 * {@link dev.kvconnector.store.Pin} is ignored. Values being read are never evicted, freed or overwritten
 * underneath their readers. Expiry uses the wall clock ({@code System.currentTimeMillis()}), the one clock all
 * processes share.
 *
 * <p>Puts, gets and sizes allocate nothing on the heap once warm: keys are encoded into a per-thread scratch
 * segment, values are copied once between the caller's segment and the mapping. A claim or a view allocates one
 * segment object, its slice of the mapping.
 *
 * <p>Limits: 64 store instances open on one file at once (across all processes), and 63 reads in flight per
 * instance (further readers spin until one finishes), of which at most {@value #MAX_VIEWS} held views.
 *
 * <p>Threads and processes: reads take no lock. Each read leases the entry in a per-process lease record (a
 * hazard pointer in the file) while it copies; eviction and removal skip or defer leased entries. Allocation
 * and index updates happen under one cross-process spin lock in the file (a CAS on a word; no OS lock). Puts copy
 * their value outside the lock into freshly allocated space, then swap it into the index. A process killed at
 * any point leaves nothing visible half-written: its unfinished puts, its leases and, if it held it, the lock are
 * recovered by whoever next finds the process dead (pid plus start time). All processes must share a pid
 * namespace.
 *
 * <p>Zero-copy: the store declares {@link StoreCapability#CLAIM} and {@link StoreCapability#VIEW}. A claim
 * ({@link ShmClaim}) is a put whose copy the caller does: the entry is allocated in state WRITING under this
 * process's token and the caller writes into a slice of the mapping; the commit publishes it as a put does (same
 * index, eviction and if-absent rules), the abort frees it. Until the commit no process sees it; a writer killed
 * before it leaves an unfinished put, recovered as any other, and {@link #close()} frees this instance's open
 * claims. A view ({@link ShmView}) is a read whose lease outlives the call: the lease record stays set until the
 * release, so no remove, replace or eviction in any process frees the entry's blocks before; a process killed while
 * holding views has its leases reclaimed with its slot. Claim and view segments are slices of the mapping: used
 * after {@link #close()} they throw {@link IllegalStateException}, never touching unmapped memory.
 *
 * <p>Test hooks (system properties, read once; leave them unset in production): {@value #PROP_PUT_PAUSE_MS}
 * pauses every put half-way through copying its value, {@value #PROP_GET_PAUSE_MS} pauses every hit half-way
 * through its copy while the lease is held, {@value #PROP_LOCK_PAUSE_MS} pauses every put while it holds the
 * store lock. Each takes milliseconds.
 *
 * <p>Over 400 lines because the mapping, lock, allocator, CLOCK eviction, index, leases and crash recovery are still
 * one class; issue 17 splits them behind this facade. The claim and view handles live in their own classes.
 *
 * @see dev.kvconnector.store.shm
 */
public final class ShmStore implements KVStore {
    /** Test hook: ms to pause in the middle of each put's copy. */
    public static final String PROP_PUT_PAUSE_MS = "kvconnector.shm.testHook.putPauseMillis";
    /** Test hook: ms to pause in the middle of each hit's copy. */
    public static final String PROP_GET_PAUSE_MS = "kvconnector.shm.testHook.getPauseMillis";
    /** Test hook: ms to pause while holding the store lock in each put. */
    public static final String PROP_LOCK_PAUSE_MS = "kvconnector.shm.testHook.lockPauseMillis";
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
    private static final long PUT_PAUSE_MS = Long.getLong(PROP_PUT_PAUSE_MS, 0);
    private static final long GET_PAUSE_MS = Long.getLong(PROP_GET_PAUSE_MS, 0);
    private static final long LOCK_PAUSE_MS = Long.getLong(PROP_LOCK_PAUSE_MS, 0);
    private static final Set<String> OPTIONS =
            Set.of("capacity", "dir", "entries", "block", "ttl", "lock-timeout", "eviction");
    private static final long DEFAULT_LOCK_TIMEOUT_MS = 30_000;
    /** The store lock's back-off: Agrona's {@code BackoffIdleStrategy} defaults (see {@link #lock()}). */
    private static final long LOCK_SPINS = 10;
    private static final long LOCK_YIELDS = 5;
    private static final long MIN_PARK_NANOS = 1_000;
    private static final long MAX_PARK_NANOS = 1_000_000;
    /** How often a parked waiter asks whether the lock's holder is still alive. */
    private static final long LIVENESS_CHECK_NANOS = 10_000_000;
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{1,200}");
    private static final Set<StoreCapability> CAPABILITIES =
            Set.copyOf(EnumSet.of(StoreCapability.NATIVE_TTL, StoreCapability.SHARED_ACROSS_PROCESSES,
                    StoreCapability.LOCAL_MEMORY, StoreCapability.REMOVE, StoreCapability.CLAIM,
                    StoreCapability.VIEW));

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    static final int FREE = 0;
    static final int WRITING = 1;
    static final int COMMITTED = 2;
    static final int RETIRED = 3;
    private static final long TOMBSTONE = -1L;
    private static final long CLAIMED = -2L;
    /** {@link #allocate}'s answer when every entry record is in use. */
    private static final int NO_ENTRY = -1;
    /** {@link #allocate}'s answer when no run of free blocks is long enough. */
    private static final int NO_RUN = -2;

    private final String uri;
    private final Path path;
    private final Arena arena;
    private final MemorySegment map;
    /** {@link #map}, read-only, for the segments of views. */
    private final MemorySegment readOnlyMap;
    private final ShmLayout lay;
    private final long defaultTtlMillis;
    private final long lockTimeoutMillis;
    private final boolean evictLive;
    private final int procSlot;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder inFlight = new LongAdder();
    /** Claims of this instance neither committed nor aborted, freed by {@link #close()}; guarded by itself. */
    private final Set<ShmClaim> openClaims = Collections.newSetFromMap(new IdentityHashMap<>());
    private final AtomicInteger viewsHeld = new AtomicInteger();

    private ShmStore(String uri, Path path, Arena arena, MemorySegment map, ShmLayout lay, long defaultTtlMillis,
                     long lockTimeoutMillis, boolean evictLive, int procSlot) {
        this.uri = uri;
        this.path = path;
        this.arena = arena;
        this.map = map;
        this.readOnlyMap = map.asReadOnly();
        this.lay = lay;
        this.defaultTtlMillis = defaultTtlMillis;
        this.lockTimeoutMillis = lockTimeoutMillis;
        this.evictLive = evictLive;
        this.procSlot = procSlot;
    }

    // ------------------------------------------------------------------ open

    /**
     * Opens, or creates, the store named by {@code uri}.
     *
     * @throws KVException INVALID_URI for bad options, INVALID_CONFIG when the file's sizes differ from the URI's,
     *     CORRUPT_OBJECT for a file that is not a valid store, AUTH_FAILED for a file of another user, IO_ERROR
     */
    public static ShmStore open(StoreUri uri) {
        uri.requireKnownParams(OPTIONS).requireNoUserInfo();
        String masked = uri.masked();
        if (!uri.hosts().isEmpty()) {
            throw KVException.of(ErrorCode.INVALID_URI, "a shm: store is on this host and takes no host name")
                    .store(masked).operation("open").hint("write shm:/NAME, such as shm:/kv").build();
        }
        String name = uri.path().startsWith("/") ? uri.path().substring(1) : uri.path();
        if (!NAME.matcher(name).matches() || name.equals(".") || name.equals("..")) {
            throw KVException.of(ErrorCode.INVALID_URI, "the store name '" + name + "' is not 1 to 200 characters of "
                    + "A-Z a-z 0-9 . _ -").store(masked).operation("open")
                    .hint("write shm:/NAME, such as shm:/kv").build();
        }
        Path dir = Path.of(uri.param("dir") == null ? DEFAULT_DIR : uri.param("dir"));
        Path path = dir.resolve(name);
        long capacity = uri.sizeParam("capacity", DEFAULT_CAPACITY);
        long block = uri.sizeParam("block", DEFAULT_BLOCK);
        long entries = uri.param("entries") == null
                ? Math.clamp(capacity / (64 << 10), 1024, MAX_ENTRIES) : uri.intParam("entries", 0);
        long ttl = uri.durationMillisParam("ttl", 0);
        long lockTimeout = Math.max(1, uri.durationMillisParam("lock-timeout", DEFAULT_LOCK_TIMEOUT_MS));
        String eviction = uri.params().getOrDefault("eviction", "lru");
        if (!eviction.equals("lru") && !eviction.equals("refuse")) {
            throw KVException.of(ErrorCode.INVALID_URI, "eviction=" + eviction + " is neither lru nor refuse")
                    .store(masked).operation("open").build();
        }
        boolean evictLive = eviction.equals("lru");
        ShmLayout wanted = ShmLayout.of(capacity, block, entries);
        if (wanted == null) {
            throw KVException.of(ErrorCode.INVALID_URI, "sizes out of range: capacity=" + capacity + " bytes, block="
                    + block + " bytes, entries=" + entries).store(masked).operation("open")
                    .hint("block is a power of two from " + MIN_BLOCK + " to " + MAX_BLOCK
                            + " bytes, capacity from one block to " + MAX_CAPACITY + " bytes, entries from "
                            + MIN_ENTRIES + " to " + MAX_ENTRIES)
                    .build();
        }
        if (!Files.isDirectory(dir)) {
            throw KVException.of(ErrorCode.INVALID_CONFIG, "directory " + dir + " does not exist").store(masked)
                    .operation("open").hint("create it, or pass dir= naming a tmpfs directory such as /dev/shm")
                    .build();
        }
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            create(path, wanted, masked);
        }
        Arena arena = Arena.ofShared();
        ShmStore store;
        try {
            MemorySegment map = mapExisting(path, arena, masked);
            ShmLayout lay = validate(path, map, masked);
            checkWanted(uri, lay, wanted, path, masked);
            int slot = claimProcSlot(map, lay, path, masked);
            store = new ShmStore(masked, path, arena, map, lay, ttl, lockTimeout, evictLive, slot);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
        try {
            store.lock();
            try {
                store.reap();
            } finally {
                store.unlock();
            }
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
        LOG.debug("opened {} at {}: {} bytes in {} blocks, {} entries", masked, path, store.lay.capacity(),
                store.lay.blockCount(), store.lay.entryCount());
        return store;
    }

    private static void create(Path path, ShmLayout lay, String uri) {
        Path tmp = path.resolveSibling("." + path.getFileName() + ".creating-" + ProcessHandle.current().pid() + "-"
                + System.nanoTime());
        try {
            if (Files.getFileStore(path.getParent()).getUsableSpace() < lay.fileSize()) {
                throw KVException.of(ErrorCode.STORE_FULL, "directory " + path.getParent() + " has "
                        + Files.getFileStore(path.getParent()).getUsableSpace() + " bytes free, the store file needs "
                        + lay.fileSize()).store(uri).operation("open")
                        .hint("lower capacity=, or grow the tmpfs (mount -o remount,size=... /dev/shm)").build();
            }
            try (FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(
                    EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE)));
                 Arena arena = Arena.ofConfined()) {
                ch.write(ByteBuffer.allocate(1), lay.fileSize() - 1);
                MemorySegment m = ch.map(FileChannel.MapMode.READ_WRITE, 0, lay.fileSize(), arena);
                initialize(m, lay);
                m.force();
            }
            try {
                publishFile(tmp, path);
            } catch (FileAlreadyExistsException raced) {
                LOG.debug("another process created {} first; opening theirs", path);
            }
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot create " + path + ": " + e).store(uri).operation("open")
                    .cause(e).hint("check that " + path.getParent() + " is writable and has room").build();
        } finally {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException e) {
                LOG.warn("cannot delete temporary file {}: {}", tmp, e.toString());
            }
        }
    }

    /**
     * Makes the initialized file visible under its name only if that name is free: a hard link is atomic and never
     * replaces; where links are not supported, a move that refuses an existing target is nearly as good.
     */
    private static void publishFile(Path tmp, Path path) throws IOException {
        try {
            Files.createLink(path, tmp);
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (IOException | UnsupportedOperationException e) {
            LOG.debug("cannot hard-link {} ({}); moving it instead", path, e.toString());
            Files.move(tmp, path);
        }
    }

    private static void initialize(MemorySegment m, ShmLayout lay) {
        m.set(ValueLayout.JAVA_INT, H_VERSION, VERSION);
        m.set(ValueLayout.JAVA_INT, H_HEADER_BYTES, (int) HEADER_BYTES);
        m.set(ValueLayout.JAVA_LONG, H_FILE_SIZE, lay.fileSize());
        m.set(ValueLayout.JAVA_LONG, H_CAPACITY, lay.capacity());
        m.set(ValueLayout.JAVA_LONG, H_BLOCK_SIZE, lay.blockSize());
        m.set(ValueLayout.JAVA_LONG, H_ENTRY_COUNT, lay.entryCount());
        m.set(ValueLayout.JAVA_LONG, H_SLOT_COUNT, lay.slotCount());
        m.set(ValueLayout.JAVA_INT, H_PROC_SLOTS, PROC_SLOTS);
        m.set(ValueLayout.JAVA_INT, H_LEASES_PER_PROC, LEASES_PER_PROC);
        m.set(ValueLayout.JAVA_LONG, H_CREATOR_UID, currentUid());
        m.set(ValueLayout.JAVA_LONG, H_PID_NAMESPACE, pidNamespace());
        m.set(ValueLayout.JAVA_LONG, H_CREATED_MILLIS, System.currentTimeMillis());
        m.set(ValueLayout.JAVA_LONG, H_BITMAP_OFFSET, lay.bitmapOffset());
        m.set(ValueLayout.JAVA_LONG, H_PROC_OFFSET, lay.procOffset());
        m.set(ValueLayout.JAVA_LONG, H_INDEX_OFFSET, lay.indexOffset());
        m.set(ValueLayout.JAVA_LONG, H_ENTRY_OFFSET, lay.entryOffset());
        m.set(ValueLayout.JAVA_LONG, H_PAYLOAD_OFFSET, lay.payloadOffset());
        markTailBlocksUsed(m, lay);
        m.set(ValueLayout.JAVA_LONG, H_MAGIC, MAGIC);
    }

    /** Bits past the last block are kept set, so a free run found in the bitmap never extends past the end. */
    private static void markTailBlocksUsed(MemorySegment m, ShmLayout lay) {
        int rem = (int) (lay.blockCount() & 63);
        if (rem != 0) {
            m.set(ValueLayout.JAVA_LONG, lay.bitmapOffset() + (lay.blockCount() >>> 6) * 8, -1L << rem);
        }
    }

    private static MemorySegment mapExisting(Path path, Arena arena, String uri) {
        try {
            Map<String, Object> attrs = Files.readAttributes(path, "unix:uid,mode,size,isRegularFile",
                    LinkOption.NOFOLLOW_LINKS);
            if (!(Boolean) attrs.get("isRegularFile")) {
                throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "is not a regular file (a link or a device)");
            }
            long uid = ((Number) attrs.get("uid")).longValue();
            long me = currentUid();
            if (uid != me) {
                throw refuse(ErrorCode.AUTH_FAILED, path, uri, "belongs to uid " + uid + ", this process runs as uid "
                        + me + "; a store is private to its user");
            }
            int mode = (Integer) attrs.get("mode");
            if ((mode & 0077) != 0) {
                throw KVException.of(ErrorCode.AUTH_FAILED, path + " has mode " + Integer.toOctalString(mode & 0777)
                        + ", which lets other users read or change cached values").store(uri).operation("open")
                        .hint("chmod 600 " + path).build();
            }
            long size = (Long) attrs.get("size");
            if (size < HEADER_BYTES) {
                throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "is " + size + " bytes, shorter than the "
                        + HEADER_BYTES + "-byte header (truncated)");
            }
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS)) {
                return ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
            }
        } catch (NoSuchFileException e) {
            throw KVException.of(ErrorCode.IO_ERROR, path + " vanished while opening it").store(uri).operation("open")
                    .cause(e).hint("another process deleted it; open again").build();
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot open " + path + ": " + e).store(uri).operation("open")
                    .cause(e).hint("check the permissions of " + path).build();
        }
    }

    private static ShmLayout validate(Path path, MemorySegment m, String uri) {
        long magic = m.get(ValueLayout.JAVA_LONG, H_MAGIC);
        if (magic != MAGIC) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has magic 0x" + Long.toHexString(magic)
                    + ", not 0x" + Long.toHexString(MAGIC) + ": it is not a kvconnector shm store");
        }
        int version = m.get(ValueLayout.JAVA_INT, H_VERSION);
        int headerBytes = m.get(ValueLayout.JAVA_INT, H_HEADER_BYTES);
        if (version != VERSION || headerBytes != HEADER_BYTES) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has format version " + version + " with a "
                    + headerBytes + "-byte header; this build reads version " + VERSION + " with " + HEADER_BYTES);
        }
        long capacity = m.get(ValueLayout.JAVA_LONG, H_CAPACITY);
        long block = m.get(ValueLayout.JAVA_LONG, H_BLOCK_SIZE);
        long entries = m.get(ValueLayout.JAVA_LONG, H_ENTRY_COUNT);
        ShmLayout lay = ShmLayout.of(capacity, block, entries);
        if (lay == null || lay.capacity() != capacity) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has sizes out of range: capacity=" + capacity
                    + " bytes, block=" + block + " bytes, entries=" + entries);
        }
        long[][] fields = {
                {H_FILE_SIZE, lay.fileSize()}, {H_SLOT_COUNT, lay.slotCount()},
                {H_BITMAP_OFFSET, lay.bitmapOffset()}, {H_PROC_OFFSET, lay.procOffset()},
                {H_INDEX_OFFSET, lay.indexOffset()}, {H_ENTRY_OFFSET, lay.entryOffset()},
                {H_PAYLOAD_OFFSET, lay.payloadOffset()}};
        String[] names = {"file size", "index slots", "bitmap offset", "process table offset", "index offset",
                "entry table offset", "payload offset"};
        for (int i = 0; i < fields.length; i++) {
            long stored = m.get(ValueLayout.JAVA_LONG, fields[i][0]);
            if (stored != fields[i][1]) {
                throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "records " + names[i] + " " + stored
                        + ", but its sizes (capacity=" + capacity + ", block=" + block + ", entries=" + entries
                        + ") give " + fields[i][1]);
            }
        }
        if (m.byteSize() != lay.fileSize()) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "is " + m.byteSize() + " bytes, but its header says "
                    + lay.fileSize() + " (truncated or extended)");
        }
        int procs = m.get(ValueLayout.JAVA_INT, H_PROC_SLOTS);
        int leases = m.get(ValueLayout.JAVA_INT, H_LEASES_PER_PROC);
        if (procs != PROC_SLOTS || leases != LEASES_PER_PROC) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has " + procs + " process slots of " + leases
                    + " leases; this build uses " + PROC_SLOTS + " of " + LEASES_PER_PROC);
        }
        long creator = m.get(ValueLayout.JAVA_LONG, H_CREATOR_UID);
        long me = currentUid();
        if (creator != me) {
            throw refuse(ErrorCode.AUTH_FAILED, path, uri, "was created by uid " + creator
                    + ", this process runs as uid " + me);
        }
        long ns = m.get(ValueLayout.JAVA_LONG, H_PID_NAMESPACE);
        long myNs = pidNamespace();
        if (ns != 0 && myNs != 0 && ns != myNs) {
            throw refuse(ErrorCode.INVALID_CONFIG, path, uri, "was created in pid namespace " + ns + ", this process "
                    + "is in " + myNs + "; crash recovery checks pids, so sharers must see each other's pids");
        }
        return lay;
    }

    private static void checkWanted(StoreUri uri, ShmLayout lay, ShmLayout wanted, Path path, String masked) {
        String[] names = {"capacity", "block", "entries"};
        long[] have = {lay.capacity(), lay.blockSize(), lay.entryCount()};
        long[] want = {wanted.capacity(), wanted.blockSize(), wanted.entryCount()};
        for (int i = 0; i < names.length; i++) {
            if (uri.param(names[i]) != null && have[i] != want[i]) {
                throw KVException.of(ErrorCode.INVALID_CONFIG, path + " exists with " + names[i] + "=" + have[i]
                        + ", the URI asks for " + want[i]).store(masked).operation("open")
                        .hint("use " + names[i] + "=" + have[i] + " or leave it out, or delete " + path
                                + " if no process uses it").build();
            }
        }
    }

    private static KVException refuse(ErrorCode code, Path path, String uri, String why) {
        return KVException.of(code, path + " " + why).store(uri).operation("open")
                .hint("delete " + path + " if no process uses it, and open again to create a fresh store").build();
    }

    private static long currentUid() {
        try {
            return ((Number) Files.getAttribute(Path.of("/proc/self"), "unix:uid")).longValue();
        } catch (IOException | UnsupportedOperationException e) {
            throw KVException.of(ErrorCode.UNSUPPORTED, "cannot read this process's uid from /proc/self: " + e)
                    .operation("open").hint("shm: stores need Linux").build();
        }
    }

    /** The inode of this process's pid namespace, or 0 where it cannot be read. */
    private static long pidNamespace() {
        try {
            String link = Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString();
            return Long.parseLong(link.substring(link.indexOf('[') + 1, link.indexOf(']')));
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }

    private static int claimProcSlot(MemorySegment m, ShmLayout lay, Path path, String uri) {
        for (int round = 0; round < 2; round++) {
            for (int p = 0; p < PROC_SLOTS; p++) {
                long off = lay.proc(p);
                long owner = (long) LONG.getVolatile(m, off);
                if (owner == 0 && LONG.compareAndSet(m, off, 0L, ProcessIdentity.SELF)) {
                    return p;
                }
            }
            reapProcSlots(m, lay);
        }
        throw KVException.of(ErrorCode.BUSY, path + " is open in " + PROC_SLOTS + " live store instances already")
                .store(uri).operation("open").hint("close stores in other processes; each open store takes a slot")
                .build();
    }

    /**
     * Frees the process slots and leases of dead processes. Needs no lock: the reaper first takes the slot over
     * with a CAS (so two reapers never both clear it, and no new process claims it half-cleared), clears the
     * leases, then frees the slot. A reaper that dies half-way leaves a slot owned by a dead process: reaped again.
     */
    private static void reapProcSlots(MemorySegment m, ShmLayout lay) {
        for (int p = 0; p < PROC_SLOTS; p++) {
            long owner = (long) LONG.getVolatile(m, lay.proc(p));
            if (owner != 0 && !ProcessIdentity.isAlive(owner)
                    && LONG.compareAndSet(m, lay.proc(p), owner, ProcessIdentity.SELF)) {
                for (int l = 0; l < LEASES_PER_PROC; l++) {
                    LONG.setVolatile(m, lay.lease(p, l), 0L);
                }
                LONG.setVolatile(m, lay.proc(p), 0L);
                LOG.info("reclaimed the process slot and leases of dead process {}", ProcessIdentity.pid(owner));
            }
        }
    }

    // ------------------------------------------------------------------ KVStore

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
        enter("put");
        try {
            KeyScratch k = key(key, "put");
            if (value == null || options == null) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "value and options must not be null").store(uri)
                        .operation("put").key(key).build();
            }
            long len = value.byteSize();
            checkFits(len, "put", key);
            if (options.ifAbsent() && lookup(k) >= 0) {
                releaseLease(k);
                return false;
            }
            long now = System.currentTimeMillis();
            long expires = expiresAt(options, now);
            long blocks = blocksFor(len);
            int e;
            long mine;
            lock();
            try {
                e = allocate(k, blocks, len, now);
                if (e < 0) {
                    throw storeFull(e, blocks, "put", key);
                }
                mine = (long) LONG.get(map, lay.entry(e) + E_STATE);
            } finally {
                unlock();
            }
            boolean copied = false;
            try {
                long dst = payload(e, "put", key);
                if (PUT_PAUSE_MS > 0) {
                    long half = len / 2;
                    MemorySegment.copy(value, 0, map, dst, half);
                    pause(PUT_PAUSE_MS);
                    MemorySegment.copy(value, half, map, dst + half, len - half);
                } else {
                    MemorySegment.copy(value, 0, map, dst, len);
                }
                copied = true;
            } catch (InternalError fault) {
                // A write to a sparse tmpfs file faults (SIGBUS) when the tmpfs has no page left.
                throw KVException.of(ErrorCode.STORE_FULL, "the file system of " + path + " has no room for a "
                        + len + "-byte value: " + fault.getMessage()).store(uri).operation("put").key(key)
                        .cause(fault).hint("grow the tmpfs (mount -o remount,size=... " + path.getParent()
                                + ") to hold the capacity of every store in it, or lower capacity=").build();
            } finally {
                if (!copied) {
                    lock();
                    try {
                        if ((long) LONG.get(map, lay.entry(e) + E_STATE) == mine) {
                            freeEntry(e);
                        }
                    } finally {
                        unlock();
                    }
                }
            }
            lock();
            try {
                if (LOCK_PAUSE_MS > 0) {
                    pause(LOCK_PAUSE_MS);
                }
                if ((long) LONG.get(map, lay.entry(e) + E_STATE) != mine) {
                    throw KVException.of(ErrorCode.STORE_ERROR, "entry " + e + " was reclaimed by a repair of "
                            + path + " while this put copied its value; the value was dropped").store(uri)
                            .operation("put").key(key).hint("retry the put; look for another process that "
                                    + "changed the file, or a pid namespace it does not share").build();
                }
                return publish(e, k, expires, options.ifAbsent(), now);
            } catch (RuntimeException ex) {
                if ((long) LONG.get(map, lay.entry(e) + E_STATE) == mine) {
                    freeEntry(e);
                }
                throw ex;
            } finally {
                unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public long getInto(String key, MemorySegment dst) {
        enter("get");
        try {
            KeyScratch k = key(key, "get");
            if (dst == null || dst.isReadOnly()) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the destination is " + (dst == null ? "null"
                        : "read-only")).store(uri).operation("get").key(key).build();
            }
            int e = lookup(k);
            if (e < 0) {
                return GetResult.MISS;
            }
            try {
                long eo = lay.entry(e);
                long len = map.get(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH);
                long src = payload(e, "get", key);
                if (len > dst.byteSize()) {
                    return GetResult.tooSmall(len);
                }
                if (GET_PAUSE_MS > 0) {
                    long half = len / 2;
                    MemorySegment.copy(map, src, dst, 0, half);
                    pause(GET_PAUSE_MS);
                    MemorySegment.copy(map, src + half, dst, half, len - half);
                } else {
                    MemorySegment.copy(map, src, dst, 0, len);
                }
                if ((int) INT.get(map, eo + E_REFERENCED) == 0) {
                    INT.set(map, eo + E_REFERENCED, 1);
                }
                return len;
            } finally {
                releaseLease(k);
            }
        } finally {
            exit();
        }
    }

    @Override
    public long size(String key) {
        enter("size");
        try {
            KeyScratch k = key(key, "size");
            int e = lookup(k);
            if (e < 0) {
                return -1;
            }
            try {
                payload(e, "size", key);
                return map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_VALUE_LENGTH);
            } finally {
                releaseLease(k);
            }
        } finally {
            exit();
        }
    }

    @Override
    public boolean remove(String key) {
        enter("remove");
        try {
            KeyScratch k = key(key, "remove");
            lock();
            try {
                long slot = findSlot(k);
                if (slot < 0) {
                    return false;
                }
                int e = slotEntry((long) LONG.get(map, lay.slot(slot)));
                boolean live = !expired(e, System.currentTimeMillis());
                unindex(e);
                retire(e);
                return live;
            } finally {
                unlock();
            }
        } finally {
            exit();
        }
    }

    /** Refuses a value of {@code bytes} that no eviction could make room for. */
    private void checkFits(long bytes, String op, String key) {
        if (bytes > lay.capacity()) {
            throw KVException.of(ErrorCode.VALUE_TOO_LARGE, "a value of " + bytes + " bytes exceeds the capacity of "
                    + lay.capacity() + " bytes").store(uri).operation(op).key(key)
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

    // ------------------------------------------------------------------ claims and views

    /** A claim handle for this store. */
    @Override
    public StoreClaim newClaim() {
        enter("newClaim");
        exit();
        return new ShmClaim(this);
    }

    /**
     * Allocates the entry and blocks for {@code bytes} bytes as a put does (evicting and recovering dead processes'
     * space as needed) and hands {@code claim} a slice of the mapping over them. The entry stays WRITING, invisible,
     * until the commit; {@code FULL} where a put would fail with {@code STORE_FULL}.
     */
    @Override
    public int tryClaim(String key, long bytes, PutOptions options, StoreClaim claim) {
        enter("tryClaim");
        try {
            KeyScratch k = key(key, "tryClaim");
            ShmClaim c = ShmClaim.ownedBy(this, claim, key);
            if (options == null || bytes < 0) {
                throw KVException.of(ErrorCode.INVALID_ARGUMENT, "cannot claim " + bytes + " bytes with options "
                        + options).store(uri).operation("tryClaim").key(key).build();
            }
            checkFits(bytes, "tryClaim", key);
            if (options.ifAbsent() && lookup(k) >= 0) {
                releaseLease(k);
                return ClaimResult.EXISTS;
            }
            long now = System.currentTimeMillis();
            long blocks = blocksFor(bytes);
            int e;
            long mine;
            long dst;
            lock();
            try {
                e = allocate(k, blocks, bytes, now);
                if (e < 0) {
                    return ClaimResult.FULL;
                }
                mine = (long) LONG.get(map, lay.entry(e) + E_STATE);
                dst = lay.payloadOffset() + map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_PAYLOAD_OFFSET);
            } finally {
                unlock();
            }
            c.hold(key, e, mine, map.asSlice(dst, bytes), expiresAt(options, now), options.ifAbsent());
            synchronized (openClaims) {
                openClaims.add(c);
            }
            return ClaimResult.CLAIMED;
        } finally {
            exit();
        }
    }

    /**
     * Publishes a claim's entry as a put publishes its own, and empties the handle. When the lock cannot be taken
     * (TIMEOUT) the handle keeps its claim, for an abort or the close to free.
     */
    boolean commitClaim(ShmClaim c) {
        String key = c.key;
        if (!enterIfOpen()) {
            c.clear();
            throw closedError("commit", key);
        }
        try {
            KeyScratch k = KeyScratch.encode(key);
            int e = c.entry;
            boolean reclaimed = false;
            boolean stored = false;
            lock();
            try {
                if ((long) LONG.get(map, lay.entry(e) + E_STATE) != c.stateWord) {
                    reclaimed = true;
                } else {
                    stored = publish(e, k, c.expiresMillis, c.ifAbsent, System.currentTimeMillis());
                }
            } catch (RuntimeException ex) {
                if ((long) LONG.get(map, lay.entry(e) + E_STATE) == c.stateWord) {
                    freeEntry(e);
                }
                forget(c);
                throw ex;
            } finally {
                unlock();
            }
            forget(c);
            if (reclaimed) {
                throw KVException.of(ErrorCode.STORE_ERROR, "entry " + e + " was reclaimed by a repair of " + path
                        + " while the claim was open; the value was dropped").store(uri).operation("commit").key(key)
                        .hint("retry the put; look for another process that changed the file, or a pid namespace "
                                + "it does not share").build();
            }
            return stored;
        } finally {
            exit();
        }
    }

    /** Frees a claim's entry unless a repair already did, and empties the handle; after the close, only empties it. */
    void abortClaim(ShmClaim c) {
        if (!enterIfOpen()) {
            c.clear();
            return;
        }
        try {
            lock();
            try {
                if ((long) LONG.get(map, lay.entry(c.entry) + E_STATE) == c.stateWord) {
                    freeEntry(c.entry);
                }
            } finally {
                unlock();
            }
            forget(c);
        } finally {
            exit();
        }
    }

    private void forget(ShmClaim c) {
        synchronized (openClaims) {
            openClaims.remove(c);
        }
        c.clear();
    }

    /** A view handle for this store. */
    @Override
    public StoreView newView() {
        enter("newView");
        exit();
        return new ShmView(this);
    }

    /**
     * Looks the key up as a get does and, on a hit, hands the read's lease record to {@code view} instead of
     * clearing it: the entry stays leased until the view's release.
     *
     * @throws KVException BUSY when this instance already holds {@value #MAX_VIEWS} views
     */
    @Override
    public long tryView(String key, StoreView view) {
        enter("tryView");
        try {
            KeyScratch k = key(key, "tryView");
            ShmView v = ShmView.ownedBy(this, view, key);
            if (viewsHeld.incrementAndGet() > MAX_VIEWS) {
                viewsHeld.decrementAndGet();
                throw KVException.of(ErrorCode.BUSY, "this store instance holds " + MAX_VIEWS + " views already")
                        .store(uri).operation("tryView").key(key)
                        .hint("release views before taking more; each held view keeps one of the "
                                + LEASES_PER_PROC + " lease records of this instance").build();
            }
            boolean held = false;
            try {
                int e = lookup(k);
                if (e < 0) {
                    return GetResult.MISS;
                }
                long len;
                long src;
                try {
                    long eo = lay.entry(e);
                    len = map.get(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH);
                    src = payload(e, "tryView", key);
                    if ((int) INT.get(map, eo + E_REFERENCED) == 0) {
                        INT.set(map, eo + E_REFERENCED, 1);
                    }
                } catch (RuntimeException ex) {
                    releaseLease(k);
                    throw ex;
                }
                v.hold(k.leaseOffset, readOnlyMap.asSlice(src, len));
                k.leaseOffset = -1;
                held = true;
                return len;
            } finally {
                if (!held) {
                    viewsHeld.decrementAndGet();
                }
            }
        } finally {
            exit();
        }
    }

    /** Clears a view's lease record, freeing its entry if that was removed meanwhile; after the close, nothing. */
    void releaseView(long leaseOffset) {
        if (!enterIfOpen()) {
            return;
        }
        try {
            viewsHeld.decrementAndGet();
            releaseLeaseAt(leaseOffset);
        } finally {
            exit();
        }
    }

    @Override
    public String healthCheck() {
        enter("healthCheck");
        try {
            return uri + " at " + path + " answered: " + freeBytes() + " of " + lay.capacity() + " bytes free, "
                    + liveEntries() + " of " + lay.entryCount() + " entries live, "
                    + (long) LONG.getVolatile(map, H_RETIRED_ENTRIES) + " removed but still being read";
        } finally {
            exit();
        }
    }

    /**
     * Frees this instance's open claims and drops its views' leases (freeing entries removed while viewed), releases
     * its slot in the file and unmaps it. The file stays for other processes. Claim and view segments throw
     * {@link IllegalStateException} from now on; releasing a view afterwards only empties the handle.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        while (inFlight.sum() != 0) {
            Thread.onSpinWait();
        }
        ShmClaim[] claims;
        synchronized (openClaims) {
            claims = openClaims.toArray(new ShmClaim[0]);
            openClaims.clear();
        }
        long[] leased = new long[LEASES_PER_PROC];
        int views = 0;
        for (int l = 0; l < LEASES_PER_PROC; l++) {
            long held = (long) LONG.getAndSet(map, lay.lease(procSlot, l), 0L);
            if (held > 0) {
                leased[views++] = held - 1;
            }
        }
        if (claims.length > 0 || views > 0) {
            freeAtClose(claims, leased, views);
        }
        LONG.setVolatile(map, lay.proc(procSlot), 0L);
        arena.close();
    }

    /**
     * Frees the entries of open claims and the retired entries that this instance's views kept. Without the lock
     * (held by a stuck process) they stay allocated until this process exits and another one reaps them.
     */
    private void freeAtClose(ShmClaim[] claims, long[] leased, int views) {
        try {
            lock();
        } catch (KVException e) {
            LOG.warn("closing {}: {} open claims and {} views stay allocated until this process exits: {}", uri,
                    claims.length, views, e.getMessage());
            return;
        }
        try {
            for (ShmClaim c : claims) {
                if ((long) LONG.get(map, lay.entry(c.entry) + E_STATE) == c.stateWord) {
                    freeEntry(c.entry);
                }
            }
            for (int i = 0; i < views; i++) {
                int e = (int) Math.clamp(leased[i], 0, lay.entryCount() - 1);
                if (state(e) == RETIRED && !leased(e)) {
                    freeEntry(e);
                }
            }
        } finally {
            unlock();
        }
    }

    // ------------------------------------------------------------------ figures and maintenance

    /** Bytes of payload space not allocated to any entry, in bytes (whole blocks). */
    public long freeBytes() {
        enter("freeBytes");
        try {
            return (lay.blockCount() - (long) LONG.getVolatile(map, H_USED_BLOCKS)) * lay.blockSize();
        } finally {
            exit();
        }
    }

    /** Payload capacity in bytes. */
    public long capacityBytes() {
        return lay.capacity();
    }

    /** Committed entries in the index, expired ones included until they are reclaimed. */
    public long liveEntries() {
        enter("liveEntries");
        try {
            return (long) LONG.getVolatile(map, H_LIVE_ENTRIES);
        } finally {
            exit();
        }
    }

    /** The file backing this store. */
    public Path path() {
        return path;
    }

    /**
     * Reclaims what dead processes left (unfinished puts, leases, process slots), expired entries, and removed
     * entries whose readers have finished. Puts do this by themselves when space runs out; call it to get the
     * space back sooner.
     */
    public void reclaim() {
        enter("reclaim");
        try {
            lock();
            try {
                reap();
                long now = System.currentTimeMillis();
                int mark = watermark();
                for (int e = 0; e < mark; e++) {
                    int st = state(e);
                    if (st == COMMITTED && expired(e, now)) {
                        unindex(e);
                        retire(e);
                    }
                }
            } finally {
                unlock();
            }
        } finally {
            exit();
        }
    }

    /** The token of the process that holds the store lock, or 0; for tests. */
    long lockOwner() {
        return (long) LONG.getVolatile(map, H_LOCK);
    }

    /** Lease records held in the file by all processes; for tests. */
    int leasesHeld() {
        int n = 0;
        for (int p = 0; p < PROC_SLOTS; p++) {
            for (int l = 0; l < LEASES_PER_PROC; l++) {
                if ((long) LONG.getVolatile(map, lay.lease(p, l)) > 0) {
                    n++;
                }
            }
        }
        return n;
    }

    // ------------------------------------------------------------------ reads

    private KeyScratch key(String key, String op) {
        if (key == null) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is null").store(uri).operation(op).build();
        }
        KeyScratch k = KeyScratch.encode(key);
        if (k.length < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "the key is longer than " + MAX_KEY_BYTES
                    + " UTF-8 bytes").store(uri).operation(op).key(key)
                    .hint("shorten the key, or hash its tail (a key scheme can do that)").build();
        }
        return k;
    }

    /**
     * Finds the committed, unexpired entry for the key and leases it; the caller releases the lease with
     * {@link #releaseLease}. Returns the entry index, or -1 on a miss (no lease held then).
     */
    private int lookup(KeyScratch k) {
        try {
            return probe(k);
        } catch (RuntimeException e) {
            releaseLease(k);
            throw e;
        }
    }

    private int probe(KeyScratch k) {
        long mask = lay.slotCount() - 1;
        int tag = (int) (k.hash >>> 32);
        restart:
        for (int attempt = 0; ; attempt++) {
            long epoch = stableEpoch();
            long i = k.hash & mask;
            for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
                long so = lay.slot(i);
                long w = (long) LONG.getVolatile(map, so);
                if (w == 0) {
                    break;
                }
                if (w == TOMBSTONE || (int) (w >>> 32) != tag) {
                    continue;
                }
                int e = slotEntry(w);
                setLease(k, e + 1L);
                // Dekker with the remover: it tombstones the slot and then scans leases; we lease, then re-read.
                if ((long) LONG.getVolatile(map, so) != w) {
                    clearLease(k);
                    continue restart;
                }
                long eo = lay.entry(e);
                long sw = (long) LONG.getAcquire(map, eo + E_STATE);
                if ((sw & 0xFF) != COMMITTED || !keyMatches(eo, k)) {
                    clearLease(k);
                    continue;
                }
                if (expired(e, System.currentTimeMillis())) {
                    releaseLease(k);
                    reclaimExpired(e, sw);
                    return -1;
                }
                return e;
            }
            releaseLease(k);
            if ((long) LONG.getVolatile(map, H_INDEX_EPOCH) == epoch || attempt > 1000) {
                return -1;
            }
        }
    }

    /** The index epoch when no rebuild runs; waits out a rebuild, and repairs one abandoned by a dead process. */
    private long stableEpoch() {
        for (int spins = 0; ; spins++) {
            long epoch = (long) LONG.getVolatile(map, H_INDEX_EPOCH);
            if ((epoch & 1) == 0) {
                return epoch;
            }
            if (spins > 10_000) {
                lock();
                unlock();
                spins = 0;
            }
            Thread.onSpinWait();
        }
    }

    private boolean keyMatches(long eo, KeyScratch k) {
        int len = (int) INT.get(map, eo + E_KEY_LENGTH);
        return len == k.length && (long) LONG.get(map, eo + E_KEY_HASH) == k.hash
                && MemorySegment.mismatch(map, eo + E_KEY, eo + E_KEY + len, k.bytes, 0, len) == -1;
    }

    private void setLease(KeyScratch k, long value) {
        if (k.leaseOffset >= 0) {
            LONG.setVolatile(map, k.leaseOffset, value);
            return;
        }
        int start = (int) (Thread.currentThread().threadId() % LEASES_PER_PROC);
        for (int spins = 0; ; spins++) {
            for (int j = 0; j < LEASES_PER_PROC; j++) {
                long off = lay.lease(procSlot, (start + j) % LEASES_PER_PROC);
                if ((long) LONG.get(map, off) == 0 && LONG.compareAndSet(map, off, 0L, value)) {
                    k.leaseOffset = off;
                    return;
                }
            }
            if (spins > 100) {
                Thread.yield();
            } else {
                Thread.onSpinWait();
            }
        }
    }

    private void clearLease(KeyScratch k) {
        LONG.setVolatile(map, k.leaseOffset, CLAIMED);
    }

    private void releaseLease(KeyScratch k) {
        if (k.leaseOffset < 0) {
            return;
        }
        long off = k.leaseOffset;
        k.leaseOffset = -1;
        releaseLeaseAt(off);
    }

    /** Clears the lease record at {@code off}; frees the entry it named when that was retired and is now unleased. */
    private void releaseLeaseAt(long off) {
        long held = (long) LONG.get(map, off);
        LONG.setVolatile(map, off, 0L);
        if (held > 0) {
            int e = (int) (held - 1);
            if ((((long) LONG.getVolatile(map, lay.entry(e) + E_STATE)) & 0xFF) == RETIRED && tryLock()) {
                try {
                    if (state(e) == RETIRED && !leased(e)) {
                        freeEntry(e);
                    }
                } finally {
                    unlock();
                }
            }
        }
    }

    private void reclaimExpired(int e, long stateWord) {
        if (!tryLock()) {
            return;
        }
        try {
            if ((long) LONG.get(map, lay.entry(e) + E_STATE) == stateWord) {
                unindex(e);
                retire(e);
            }
        } finally {
            unlock();
        }
    }

    /** The entry's payload offset in the file, after checking the entry's numbers against the payload area. */
    private long payload(int e, String op, String key) {
        long eo = lay.entry(e);
        long off = map.get(ValueLayout.JAVA_LONG, eo + E_PAYLOAD_OFFSET);
        long blocks = map.get(ValueLayout.JAVA_LONG, eo + E_BLOCKS);
        long len = map.get(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH);
        if (!payloadInBounds(off, blocks, len)) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "entry " + e + " claims payload offset=" + off
                    + " blocks=" + blocks + " length=" + len + " outside the payload area of " + lay.capacity()
                    + " bytes in blocks of " + lay.blockSize()).store(uri).operation(op).key(key)
                    .hint("the file " + path + " was changed by something else; delete it if no process uses it")
                    .build();
        }
        return lay.payloadOffset() + off;
    }

    private boolean payloadInBounds(long off, long blocks, long len) {
        return off >= 0 && blocks >= 0 && len >= 0 && off % lay.blockSize() == 0 && blocks <= lay.blockCount()
                && off <= lay.capacity() - blocks * lay.blockSize() && len <= blocks * lay.blockSize();
    }

    private int slotEntry(long w) {
        long e = (w & 0xFFFF_FFFFL) - 1;
        if (e < 0 || e >= lay.entryCount()) {
            throw KVException.of(ErrorCode.CORRUPT_OBJECT, "an index slot names entry " + e + ", outside the "
                    + lay.entryCount() + " entries").store(uri)
                    .hint("the file " + path + " was changed by something else; delete it if no process uses it")
                    .build();
        }
        return (int) e;
    }

    // ------------------------------------------------------------------ the store lock

    /**
     * Takes the store lock. A waiter spins 10 times, yields 5 times, then parks from 1 us doubling to 1 ms (the
     * parameters of Agrona's {@code BackoffIdleStrategy}, without the library); while parked it gives up after
     * {@code lock-timeout} and every 10 ms takes the lock over from a dead holder.
     *
     * <p>Why this back-off: measured with {@code ShmContentionBenchmark} (benchmarks module), 1, 2 and 4 writer
     * JVMs putting and removing 4 KiB values of their own keys in one store, 2 vCPUs at load 2 to 6, five or six
     * runs of each back-off interleaved. The lock is held for most of such an operation (0.75 us alone), so with two
     * writers it is always contended. The previous back-off, 200 spins, then yields to 2000, then 50 us parks, kept
     * every waiter on a CPU, and the writers took turns, each operation moving the lock's and the index's cache
     * lines between cores: 0.57 to 0.88 million operations a second for 2 writers and 0.39 to 0.68 for 4, against
     * 0.78 to 1.25 for one, with p99 of 3.4 to 7.6 us. With this one the loser parks and the holder runs on: 0.89 to
     * 1.17 million for 2 writers and 0.78 to 1.03 for 4 (medians 1.05 and 0.95 against 0.68 and 0.54), p99 1.3 to
     * 1.5 us for 2 and 1.2 to 5.2 us for 4, the writers using about 1.2 CPUs where the old back-off used nearly 2.
     * The cost is the rare waiter that stays parked while others keep taking the lock: p99.9 at 4 writers rose from
     * 45 to 227 us to 156 to 567 us. 10 spins and 5 yields with a fixed 50 us park did worse than both at the tail
     * (p99.9 0.7 to 1.2 ms at 4 writers). A 4 MiB value takes 100 us to copy, outside the lock, which is then too
     * rare to matter: both back-offs gave the same throughput and p99 (two runs each).
     */
    private void lock() {
        long waitingSince = 0;
        long lastLivenessCheck = 0;
        long park = MIN_PARK_NANOS;
        for (long spins = 0; ; spins++) {
            long owner = (long) LONG.getVolatile(map, H_LOCK);
            if (owner == 0) {
                if (LONG.compareAndSet(map, H_LOCK, 0L, ProcessIdentity.SELF)) {
                    return;
                }
                continue;
            }
            if (spins < LOCK_SPINS) {
                Thread.onSpinWait();
            } else if (spins < LOCK_SPINS + LOCK_YIELDS) {
                Thread.yield();
            } else {
                long now = System.nanoTime();
                if (waitingSince == 0) {
                    waitingSince = now;
                    lastLivenessCheck = now;
                } else if (now - waitingSince > lockTimeoutMillis * 1_000_000) {
                    throw KVException.of(ErrorCode.TIMEOUT, "process " + ProcessIdentity.pid(owner)
                            + " has held the lock of " + path + " for more than " + lockTimeoutMillis + " ms")
                            .store(uri).hint("that process is alive but stuck (stopped with SIGSTOP, or hung): "
                                    + "resume or kill it; or raise lock-timeout=").build();
                }
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, MAX_PARK_NANOS);
                if (now - lastLivenessCheck >= LIVENESS_CHECK_NANOS) {
                    lastLivenessCheck = now;
                    if (owner != ProcessIdentity.SELF && !ProcessIdentity.isAlive(owner)
                            && LONG.compareAndSet(map, H_LOCK, owner, ProcessIdentity.SELF)) {
                        LOG.warn("process {} died holding the lock of {}; repairing the store",
                                ProcessIdentity.pid(owner), path);
                        rebuild();
                        return;
                    }
                }
            }
        }
    }

    private boolean tryLock() {
        return (long) LONG.getVolatile(map, H_LOCK) == 0 && LONG.compareAndSet(map, H_LOCK, 0L, ProcessIdentity.SELF);
    }

    private void unlock() {
        LONG.setRelease(map, H_LOCK, 0L);
    }

    // ------------------------------------------------------------------ under the lock

    private long header(long off) {
        return (long) LONG.get(map, off);
    }

    /** Writes a shared word under the lock; the lock's release publishes it. */
    private void header(long off, long v) {
        LONG.setRelease(map, off, v);
    }

    /**
     * The index epoch is a seqlock for lock-free readers: fully fenced, so slot writes never move before the odd
     * value or after the even one.
     */
    private void epoch(long v) {
        LONG.setVolatile(map, H_INDEX_EPOCH, v);
    }

    private int state(int e) {
        return (int) ((long) LONG.get(map, lay.entry(e) + E_STATE) & 0xFF);
    }

    private void setState(int e, int state) {
        long eo = lay.entry(e);
        long w = (long) LONG.get(map, eo + E_STATE);
        long gen = state == WRITING ? (w >>> 8) + 1 : w >>> 8;
        if (state == RETIRED) {
            // Dekker with the last reader out: it clears its lease and then reads the state, we do the reverse.
            LONG.setVolatile(map, eo + E_STATE, gen << 8 | state);
        } else {
            LONG.setRelease(map, eo + E_STATE, gen << 8 | state);
        }
    }

    private boolean expired(int e, long now) {
        long exp = map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_EXPIRES_MILLIS);
        return exp != 0 && now >= exp;
    }

    /** Whether any process holds a lease on the entry. */
    private boolean leased(int e) {
        long want = e + 1L;
        for (int p = 0; p < PROC_SLOTS; p++) {
            if ((long) LONG.getVolatile(map, lay.proc(p)) == 0) {
                continue;
            }
            for (int l = 0; l < LEASES_PER_PROC; l++) {
                if ((long) LONG.getVolatile(map, lay.lease(p, l)) == want) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Takes a free entry and a run of {@code blocks} free blocks, evicting and reaping as needed, and marks the entry
     * WRITING under this process's token. Returns the entry, or {@link #NO_ENTRY} / {@link #NO_RUN} when there is no
     * room (nothing taken). Caller holds the lock.
     */
    private int allocate(KeyScratch k, long blocks, long len, long now) {
        int e = -1;
        boolean reaped = false;
        while (true) {
            if (e < 0) {
                e = popFreeEntry();
            }
            long block = e < 0 ? -1 : blocks == 0 ? 0 : allocBlocks(blocks);
            if (block >= 0) {
                long eo = lay.entry(e);
                map.set(ValueLayout.JAVA_LONG, eo + E_OWNER, ProcessIdentity.SELF);
                map.set(ValueLayout.JAVA_LONG, eo + E_STARTED_MILLIS, now);
                map.set(ValueLayout.JAVA_LONG, eo + E_PAYLOAD_OFFSET, block * lay.blockSize());
                map.set(ValueLayout.JAVA_LONG, eo + E_BLOCKS, blocks);
                map.set(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH, len);
                map.set(ValueLayout.JAVA_LONG, eo + E_EXPIRES_MILLIS, 0L);
                map.set(ValueLayout.JAVA_LONG, eo + E_KEY_HASH, k.hash);
                map.set(ValueLayout.JAVA_INT, eo + E_KEY_LENGTH, k.length);
                map.set(ValueLayout.JAVA_INT, eo + E_REFERENCED, 0);
                MemorySegment.copy(k.bytes, 0, map, eo + E_KEY, k.length);
                header(H_USED_BLOCKS, header(H_USED_BLOCKS) + blocks);
                setState(e, WRITING);
                return e;
            }
            if (evictOne(now)) {
                continue;
            }
            if (!reaped) {
                reap();
                reaped = true;
                continue;
            }
            if (e >= 0) {
                pushFreeEntry(e);
                return NO_RUN;
            }
            return NO_ENTRY;
        }
    }

    /** The STORE_FULL error for {@link #allocate}'s answer {@code why}. */
    private KVException storeFull(int why, long blocks, String op, String key) {
        return KVException.of(ErrorCode.STORE_FULL, (why == NO_ENTRY ? "all " + lay.entryCount() + " entries are in use"
                : "no run of " + blocks + " free blocks of " + lay.blockSize() + " bytes")
                + (evictLive ? " and nothing can be evicted: every entry is being written or read"
                : " and eviction=refuse is set")).store(uri).operation(op).key(key)
                .hint(evictLive ? "retry; or raise capacity= / entries= (delete the store file first)"
                        : "remove entries, or raise capacity= / entries= (delete the store file first)").build();
    }

    /** Entries below this index have been handed out at least once; clamped, as it is read from the file. */
    private int watermark() {
        return (int) Math.clamp(header(H_ENTRY_WATERMARK), 0, lay.entryCount());
    }

    private int popFreeEntry() {
        long head = header(H_FREE_HEAD);
        if (head != 0) {
            int e = (int) (head - 1);
            if (e < 0 || e >= lay.entryCount()) {
                rebuild();
                return popFreeEntry();
            }
            header(H_FREE_HEAD, map.get(ValueLayout.JAVA_INT, lay.entry(e) + E_NEXT_FREE));
            return e;
        }
        int mark = watermark();
        if (mark < lay.entryCount()) {
            header(H_ENTRY_WATERMARK, mark + 1L);
            return mark;
        }
        return -1;
    }

    private void pushFreeEntry(int e) {
        map.set(ValueLayout.JAVA_INT, lay.entry(e) + E_NEXT_FREE, (int) header(H_FREE_HEAD));
        header(H_FREE_HEAD, e + 1L);
    }

    /** Next fit over the bitmap; returns the first block of a free run, marked used, or -1. */
    private long allocBlocks(long n) {
        long hint = header(H_BITMAP_HINT);
        long start = hint >= 0 && hint < lay.blockCount() ? hint : 0;
        long found = findRun(start, n);
        if (found < 0 && start > 0) {
            found = findRun(0, n);
        }
        if (found >= 0) {
            setBits(found, n, true);
            header(H_BITMAP_HINT, found + n);
        }
        return found;
    }

    private long findRun(long from, long n) {
        long run = 0;
        long runStart = -1;
        long pos = from;
        long end = lay.blockCount();
        while (pos < end) {
            long word = (long) LONG.get(map, lay.bitmapOffset() + (pos >>> 6) * 8);
            int bit = (int) (pos & 63);
            if (bit == 0 && word == -1L) {
                run = 0;
                pos += 64;
            } else if (bit == 0 && word == 0) {
                if (run == 0) {
                    runStart = pos;
                }
                run += 64;
                pos += 64;
            } else {
                if ((word >>> bit & 1) == 0) {
                    if (run == 0) {
                        runStart = pos;
                    }
                    run++;
                } else {
                    run = 0;
                }
                pos++;
            }
            if (run >= n) {
                return runStart;
            }
        }
        return -1;
    }

    private void setBits(long from, long n, boolean used) {
        long pos = from;
        long end = from + n;
        while (pos < end) {
            long wo = lay.bitmapOffset() + (pos >>> 6) * 8;
            int bit = (int) (pos & 63);
            int count = (int) Math.min(64 - bit, end - pos);
            long mask = (count == 64 ? -1L : (1L << count) - 1) << bit;
            long word = (long) LONG.get(map, wo);
            LONG.set(map, wo, used ? word | mask : word & ~mask);
            pos += count;
        }
    }

    private boolean runFree(long from, long n) {
        for (long b = from; b < from + n; b++) {
            long word = (long) LONG.get(map, lay.bitmapOffset() + (b >>> 6) * 8);
            if ((word >>> (b & 63) & 1) != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Advances the CLOCK hand until one entry's space is freed; false when a full double sweep frees nothing. With
     * {@code eviction=refuse} only dead, expired and removed entries are freed.
     */
    private boolean evictOne(long now) {
        int mark = watermark();
        if (mark == 0) {
            return false;
        }
        for (long step = 0; step < 2 * mark; step++) {
            long hand = header(H_CLOCK_HAND);
            int e = (int) (hand >= 0 && hand < mark ? hand : 0);
            header(H_CLOCK_HAND, (e + 1L) % mark);
            long eo = lay.entry(e);
            switch (state(e)) {
                case WRITING -> {
                    if (!ProcessIdentity.isAlive(map.get(ValueLayout.JAVA_LONG, eo + E_OWNER))) {
                        freeEntry(e);
                        return true;
                    }
                }
                case RETIRED -> {
                    if (!leased(e)) {
                        freeEntry(e);
                        return true;
                    }
                }
                case COMMITTED -> {
                    boolean expired = expired(e, now);
                    if (!expired && !evictLive) {
                        continue;
                    }
                    if (!expired && map.get(ValueLayout.JAVA_INT, eo + E_REFERENCED) != 0) {
                        map.set(ValueLayout.JAVA_INT, eo + E_REFERENCED, 0);
                    } else if (!leased(e)) {
                        unindex(e);
                        if (retire(e)) {
                            return true;
                        }
                    }
                }
                default -> {
                }
            }
        }
        return false;
    }

    /** Marks an unindexed entry retired and frees it unless a reader holds a lease; returns whether freed. */
    private boolean retire(int e) {
        setState(e, RETIRED);
        header(H_RETIRED_ENTRIES, header(H_RETIRED_ENTRIES) + 1);
        if (!leased(e)) {
            freeEntry(e);
            return true;
        }
        return false;
    }

    private void freeEntry(int e) {
        long eo = lay.entry(e);
        long off = map.get(ValueLayout.JAVA_LONG, eo + E_PAYLOAD_OFFSET);
        long blocks = map.get(ValueLayout.JAVA_LONG, eo + E_BLOCKS);
        long len = map.get(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH);
        if (state(e) == RETIRED) {
            header(H_RETIRED_ENTRIES, header(H_RETIRED_ENTRIES) - 1);
        }
        if (!payloadInBounds(off, blocks, len)) {
            LOG.warn("entry {} of {} has payload offset={} blocks={} length={} outside {} bytes; repairing", e, path,
                    off, blocks, len, lay.capacity());
            setState(e, FREE);
            rebuild();
            return;
        }
        setBits(off / lay.blockSize(), blocks, false);
        // The next allocation searches from the lowest run freed since the last one: reusing pages the file already
        // has avoids a page fault (and a zeroed tmpfs page) per 4 KiB that walking on through untouched space would
        // cost. The lowest, not the latest: a consumer frees a whole request, and the next request must land on the
        // start of that space, not after its last object and on into fresh pages.
        header(H_BITMAP_HINT, Math.min(header(H_BITMAP_HINT), off / lay.blockSize()));
        header(H_USED_BLOCKS, header(H_USED_BLOCKS) - blocks);
        map.set(ValueLayout.JAVA_LONG, eo + E_BLOCKS, 0L);
        setState(e, FREE);
        pushFreeEntry(e);
    }

    /** The index slot holding the key, or -1 if absent; also used to find where to insert. */
    private long findSlot(KeyScratch k) {
        long mask = lay.slotCount() - 1;
        int tag = (int) (k.hash >>> 32);
        long i = k.hash & mask;
        for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return -1;
            }
            if (w != TOMBSTONE && (int) (w >>> 32) == tag && keyMatches(lay.entry(slotEntry(w)), k)) {
                return i;
            }
        }
        return -1;
    }

    private boolean publish(int e, KeyScratch k, long expires, boolean ifAbsent, long now) {
        long eo = lay.entry(e);
        long slot = findSlot(k);
        int old = slot >= 0 ? slotEntry((long) LONG.get(map, lay.slot(slot))) : -1;
        if (old >= 0 && ifAbsent && !expired(old, now)) {
            retire(e);
            return false;
        }
        if (old < 0 && header(H_USED_SLOTS) + 1 > lay.slotCount() * 3 / 4) {
            rebuildIndex();
        }
        map.set(ValueLayout.JAVA_LONG, eo + E_EXPIRES_MILLIS, expires);
        long seq = header(H_COMMIT_SEQ) + 1;
        header(H_COMMIT_SEQ, seq);
        map.set(ValueLayout.JAVA_LONG, eo + E_COMMIT_SEQ, seq);
        setState(e, COMMITTED);
        long word = (k.hash >>> 32) << 32 | (e + 1L);
        if (old >= 0) {
            LONG.setVolatile(map, lay.slot(slot), word);
            retire(old);
        } else {
            insert(k.hash, word);
            header(H_LIVE_ENTRIES, header(H_LIVE_ENTRIES) + 1);
        }
        return true;
    }

    /** Inserts into the first empty or tombstone slot; the caller has made sure a quarter of the slots are empty. */
    private void insert(long hash, long word) {
        long mask = lay.slotCount() - 1;
        long i = hash & mask;
        while (true) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0 || w == TOMBSTONE) {
                LONG.setVolatile(map, lay.slot(i), word);
                if (w == 0) {
                    header(H_USED_SLOTS, header(H_USED_SLOTS) + 1);
                } else {
                    header(H_TOMBSTONES, header(H_TOMBSTONES) - 1);
                }
                return;
            }
            i = (i + 1) & mask;
        }
    }

    private void unindex(int e) {
        long mask = lay.slotCount() - 1;
        long i = map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_KEY_HASH) & mask;
        for (long probes = 0; probes < lay.slotCount(); probes++, i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return;
            }
            if (w != TOMBSTONE && (w & 0xFFFF_FFFFL) == e + 1L) {
                LONG.setVolatile(map, lay.slot(i), TOMBSTONE);
                header(H_TOMBSTONES, header(H_TOMBSTONES) + 1);
                header(H_LIVE_ENTRIES, header(H_LIVE_ENTRIES) - 1);
                return;
            }
        }
    }

    /** Drops tombstones: clears the index and re-inserts every committed entry, under an odd epoch. */
    private void rebuildIndex() {
        long epoch = header(H_INDEX_EPOCH);
        epoch((epoch & 1) == 1 ? epoch + 2 : epoch + 1);
        map.asSlice(lay.indexOffset(), lay.slotCount() * 8).fill((byte) 0);
        header(H_USED_SLOTS, 0);
        header(H_TOMBSTONES, 0);
        long live = 0;
        int mark = watermark();
        for (int e = 0; e < mark; e++) {
            if (state(e) == COMMITTED) {
                long hash = map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_KEY_HASH);
                rawInsert(hash, (hash >>> 32) << 32 | (e + 1L));
                live++;
            }
        }
        header(H_LIVE_ENTRIES, live);
        epoch(header(H_INDEX_EPOCH) + 1);
    }

    private void rawInsert(long hash, long word) {
        long mask = lay.slotCount() - 1;
        long i = hash & mask;
        while ((long) LONG.get(map, lay.slot(i)) != 0) {
            i = (i + 1) & mask;
        }
        LONG.setVolatile(map, lay.slot(i), word);
        header(H_USED_SLOTS, header(H_USED_SLOTS) + 1);
    }

    /** Frees what dead processes left: process slots and leases, unfinished puts, then unleased retired entries. */
    private void reap() {
        reapProcSlots(map, lay);
        int mark = watermark();
        for (int e = 0; e < mark; e++) {
            int st = state(e);
            if (st == WRITING && !ProcessIdentity.isAlive(map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_OWNER))) {
                LOG.info("reclaiming entry {} of {}: its writer, process {}, died in a put it began {} ms ago", e,
                        path, ProcessIdentity.pid(map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_OWNER)),
                        System.currentTimeMillis() - map.get(ValueLayout.JAVA_LONG, lay.entry(e) + E_STARTED_MILLIS));
                freeEntry(e);
            } else if (st == RETIRED && !leased(e)) {
                freeEntry(e);
            }
        }
    }

    /**
     * Rebuilds every derived structure from the entry table after a process died holding the lock: the bitmap, the
     * free list, the counters and the index. Entries whose numbers do not check out, or that overlap an earlier
     * entry, are dropped; of two committed entries with one key, the later commit wins.
     */
    private void rebuild() {
        long epoch = header(H_INDEX_EPOCH);
        epoch((epoch & 1) == 1 ? epoch : epoch + 1);
        map.asSlice(lay.bitmapOffset(), lay.procOffset() - lay.bitmapOffset()).fill((byte) 0);
        markTailBlocksUsed(map, lay);
        map.asSlice(lay.indexOffset(), lay.slotCount() * 8).fill((byte) 0);
        long stored = header(H_ENTRY_WATERMARK);
        int mark = stored < 0 || stored > lay.entryCount() ? (int) lay.entryCount() : (int) stored;
        header(H_ENTRY_WATERMARK, mark);
        header(H_FREE_HEAD, 0);
        header(H_USED_SLOTS, 0);
        header(H_TOMBSTONES, 0);
        header(H_BITMAP_HINT, 0);
        long used = 0;
        long live = 0;
        long retired = 0;
        for (int e = mark - 1; e >= 0; e--) {
            long eo = lay.entry(e);
            int st = state(e);
            long off = map.get(ValueLayout.JAVA_LONG, eo + E_PAYLOAD_OFFSET);
            long blocks = map.get(ValueLayout.JAVA_LONG, eo + E_BLOCKS);
            long len = map.get(ValueLayout.JAVA_LONG, eo + E_VALUE_LENGTH);
            int keyLen = map.get(ValueLayout.JAVA_INT, eo + E_KEY_LENGTH);
            boolean keep = (st == COMMITTED || st == RETIRED
                    || st == WRITING && ProcessIdentity.isAlive(map.get(ValueLayout.JAVA_LONG, eo + E_OWNER)))
                    && keyLen >= 0 && keyLen <= MAX_KEY_BYTES && payloadInBounds(off, blocks, len)
                    && runFree(off / lay.blockSize(), blocks);
            if (!keep) {
                map.set(ValueLayout.JAVA_LONG, eo + E_BLOCKS, 0L);
                setState(e, FREE);
                pushFreeEntry(e);
                continue;
            }
            setBits(off / lay.blockSize(), blocks, true);
            used += blocks;
            if (st == RETIRED) {
                retired++;
            } else if (st == COMMITTED) {
                int rival = committedRival(e);
                if (rival < 0) {
                    long hash = map.get(ValueLayout.JAVA_LONG, eo + E_KEY_HASH);
                    rawInsert(hash, (hash >>> 32) << 32 | (e + 1L));
                    live++;
                } else {
                    long mine = map.get(ValueLayout.JAVA_LONG, eo + E_COMMIT_SEQ);
                    long theirs = map.get(ValueLayout.JAVA_LONG, lay.entry(rival) + E_COMMIT_SEQ);
                    int loser = mine > theirs ? rival : e;
                    if (loser == rival) {
                        replaceSlotEntry(rival, e);
                    }
                    setState(loser, RETIRED);
                    retired++;
                }
            }
        }
        header(H_USED_BLOCKS, used);
        header(H_LIVE_ENTRIES, live);
        header(H_RETIRED_ENTRIES, retired);
        epoch(header(H_INDEX_EPOCH) + 1);
    }

    /** An indexed entry with the same key as {@code e}, or -1. */
    private int committedRival(int e) {
        long eo = lay.entry(e);
        long hash = map.get(ValueLayout.JAVA_LONG, eo + E_KEY_HASH);
        int len = map.get(ValueLayout.JAVA_INT, eo + E_KEY_LENGTH);
        long mask = lay.slotCount() - 1;
        for (long i = hash & mask; ; i = (i + 1) & mask) {
            long w = (long) LONG.get(map, lay.slot(i));
            if (w == 0) {
                return -1;
            }
            long ro = lay.entry(slotEntry(w));
            if (map.get(ValueLayout.JAVA_LONG, ro + E_KEY_HASH) == hash
                    && map.get(ValueLayout.JAVA_INT, ro + E_KEY_LENGTH) == len
                    && MemorySegment.mismatch(map, eo + E_KEY, eo + E_KEY + len, map, ro + E_KEY,
                    ro + E_KEY + len) == -1) {
                return slotEntry(w);
            }
        }
    }

    private void replaceSlotEntry(int from, int to) {
        long mask = lay.slotCount() - 1;
        long hash = map.get(ValueLayout.JAVA_LONG, lay.entry(from) + E_KEY_HASH);
        for (long i = hash & mask; ; i = (i + 1) & mask) {
            if (((long) LONG.get(map, lay.slot(i)) & 0xFFFF_FFFFL) == from + 1L) {
                LONG.setVolatile(map, lay.slot(i), (hash >>> 32) << 32 | (to + 1L));
                return;
            }
        }
    }

    // ------------------------------------------------------------------ lifecycle

    private void enter(String op) {
        if (!enterIfOpen()) {
            throw closedError(op, null);
        }
    }

    /** Counts a call in flight, as {@link #enter} does, unless the store is closed; returns whether it counted. */
    private boolean enterIfOpen() {
        inFlight.increment();
        if (closed.get()) {
            inFlight.decrement();
            return false;
        }
        return true;
    }

    /** Whether {@link #close()} has begun. */
    boolean isClosed() {
        return closed.get();
    }

    KVException closedError(String op, String key) {
        return KVException.of(ErrorCode.CLOSED, "the store is closed").store(uri).operation(op).key(key).build();
    }

    private void exit() {
        inFlight.decrement();
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
