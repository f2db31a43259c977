package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store file and its mapping, as Agrona's {@code MarkFile} is a CnC file's: creating it (initialized under a
 * temporary name, mode 0600, then published atomically, so no one sees it half-written), mapping it into a shared
 * arena, checking its header against {@link ShmLayout} before any number in it is used as an offset, watching its
 * size while it is mapped, and unmapping it. Every refusal names the file, what is wrong with it, and the fix.
 *
 * <p>Why the size is watched: no store ever shrinks its file, but another process can ({@code truncate}, a
 * {@code cp} or {@code >} onto it). An access to a page of the mapping past the new end then raises SIGBUS. The JVM
 * turns that into an {@link InternalError} for plain loads, stores and copies, but a compare-and-set run by the
 * interpreter faults inside the VM and stops the JVM, and in compiled code the error is raised only at the next
 * safepoint poll, possibly after the store's call has returned. So the store asks the file's size ({@link #sizeNow()},
 * an {@code fstat} of the open file) before it touches the mapping, and refuses what the file no longer covers.
 */
final class ShmFile implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShmFile.class);
    /** Copies from this many bytes on are followed by a second size check ({@link #recheck}): 64 KiB, 2 to 4 us. */
    static final long RECHECK_BYTES = 64 << 10;

    private final Path path;
    private final String uri;
    private final Arena arena;
    private final MemorySegment map;
    private final MemorySegment readOnly;
    private final ShmLayout layout;
    /** The file opened once more, read-only, for {@link #sizeNow()}: not a channel, which an interrupt closes. */
    private final RandomAccessFile sizer;

    private ShmFile(Path path, String uri, Arena arena, MemorySegment map, ShmLayout layout, RandomAccessFile sizer) {
        this.path = path;
        this.uri = uri;
        this.arena = arena;
        this.map = map;
        this.readOnly = map.asReadOnly();
        this.layout = layout;
        this.sizer = sizer;
    }

    /**
     * Maps the store file at {@code path}, first creating it with the sizes of {@code wanted} when there is none.
     *
     * @param uri the store's URI, masked, for errors
     * @throws KVException CORRUPT_OBJECT for a file that is not a store of this format version and layout,
     *     AUTH_FAILED for a file of another user or one others can read, INVALID_CONFIG for a file of another pid
     *     namespace, STORE_FULL when the directory has no room for a new file, IO_ERROR
     */
    static ShmFile open(Path path, ShmLayout wanted, String uri) {
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            create(path, wanted, uri);
        }
        Arena arena = Arena.ofShared();
        RandomAccessFile sizer = null;
        try {
            MemorySegment map = mapExisting(path, arena, uri);
            sizer = openSizer(path, map.byteSize(), uri);
            return new ShmFile(path, uri, arena, map, validate(path, map, uri), sizer);
        } catch (RuntimeException e) {
            arena.close();
            closeQuietly(sizer);
            throw e;
        }
    }

    /**
     * Opens the file again for {@link #sizeNow()}, right after mapping it. Checked to be as long as the mapping: a
     * file replaced between the two opens is refused (a replacement of the same size within those microseconds would
     * go unseen, and only its truncation detection would watch the wrong file).
     */
    private static RandomAccessFile openSizer(Path path, long mapped, String uri) {
        RandomAccessFile raf = null;
        try {
            raf = new RandomAccessFile(path.toFile(), "r");
            if (raf.length() != mapped) {
                throw refuse(ErrorCode.IO_ERROR, path, uri, "changed size from " + mapped + " to " + raf.length()
                        + " bytes while it was being opened: another process is replacing or truncating it");
            }
            return raf;
        } catch (IOException e) {
            closeQuietly(raf);
            throw KVException.of(ErrorCode.IO_ERROR, "cannot open " + path + " again to watch its size: " + e)
                    .store(uri).operation("open").cause(e).hint("another process deleted it; open again").build();
        } catch (RuntimeException e) {
            closeQuietly(raf);
            throw e;
        }
    }

    private static void closeQuietly(RandomAccessFile raf) {
        if (raf == null) {
            return;
        }
        try {
            raf.close();
        } catch (IOException e) {
            LOG.debug("closing {}: {}", raf, e.toString());
        }
    }

    Path path() {
        return path;
    }

    /** The whole file, read-write. */
    MemorySegment map() {
        return map;
    }

    /** The whole file, read-only: what views are sliced from. */
    MemorySegment readOnly() {
        return readOnly;
    }

    ShmLayout layout() {
        return layout;
    }

    /**
     * The file's size in bytes now, from an {@code fstat} of the open file: about 0.1 to 0.2 us and no allocation (200
     * ns on the project's 2-vCPU VM at load 5). -1 when it cannot be read.
     */
    long sizeNow() {
        try {
            return sizer.length();
        } catch (IOException e) {
            return -1;
        }
    }

    /**
     * After a copy of {@code len} bytes that ended at file offset {@code end}, asks the file's size again when the copy
     * was at least {@link #RECHECK_BYTES} long, and fails when a truncation cut the copied bytes off during it. Two
     * things come of that one {@code fstat}: a copy that lost the race with a truncation is told apart from a whole
     * one, and the return from the native call is where HotSpot raises a fault that compiled code took during the
     * copy (the caller's {@code catch (InternalError)} then names it), where otherwise it would surface at a later
     * safepoint poll, after the store's call returned. Shorter copies end within a few microseconds of the size that
     * the call entered with, and would pay the {@code fstat} in proportion: they are not checked again.
     */
    void recheck(long end, long len, String op, String key) {
        if (len >= RECHECK_BYTES) {
            long size = sizeNow();
            if (size < end) {
                throw cutShort(size, op, key, null);
            }
        }
    }

    /**
     * What a fault on the mapping (the JVM's {@link InternalError} for SIGBUS) means: the truncation error of
     * {@link #cutShort} when the file is now shorter than the mapping, else null (the caller decides: a write into a
     * sparse tmpfs file also faults when the tmpfs has no page left).
     */
    KVException truncated(InternalError fault, String op, String key) {
        long size = sizeNow();
        return size >= layout.fileSize() ? null : cutShort(size, op, key, fault);
    }

    /**
     * {@code fault}, a fault on the mapping that reached the store's boundary, as the store reports it: the truncation
     * error when the file is now shorter than the mapping, else {@code fault} itself, rethrown. The store's calls catch
     * it there because compiled code raises such a fault at its next safepoint poll, which may lie in any frame of the
     * call (a return from a method compiled on its own), not only around the copy that took it.
     */
    RuntimeException named(InternalError fault, String op, String key) {
        KVException truncated = truncated(fault, op, key);
        if (truncated == null) {
            throw fault;
        }
        return truncated;
    }

    /**
     * CORRUPT_OBJECT for a file of {@code size} bytes, shorter than the mapping: it names the file, both sizes, what
     * is lost, and the likely cause.
     *
     * @param cause the fault that revealed it, or null
     */
    KVException cutShort(long size, String op, String key, Throwable cause) {
        String lost = size < layout.payloadOffset() ? "the store's tables are lost with it, so no value can be read"
                : "values stored past byte " + size + " are lost; those before it can still be read";
        return KVException.of(ErrorCode.CORRUPT_OBJECT, path + " is " + (size < 0 ? "unreadable (" + size + ")"
                : size + " bytes") + ", but this store mapped it at " + layout.fileSize() + " bytes: another process "
                + "truncated or replaced it while the store was open; " + lost).store(uri).operation(op).key(key)
                .cause(cause).hint("no store shrinks its file: find what truncated or overwrote " + path
                        + " (a truncate, cp or > onto it), then close every store on it, delete it and open again to "
                        + "create a fresh store").build();
    }

    /** Unmaps the file: every segment sliced from it throws {@link IllegalStateException} from now on. */
    @Override
    public void close() {
        arena.close();
        closeQuietly(sizer);
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
        m.set(ValueLayout.JAVA_LONG, H_RING_OFFSET, lay.ringOffset());
        m.set(ValueLayout.JAVA_LONG, H_RING_BYTES, lay.ringBytes());
        m.set(ValueLayout.JAVA_LONG, H_EVENT_EPOCH, (System.currentTimeMillis() << 12)
                | ThreadLocalRandom.current().nextInt(1 << 12));
        new BlockAllocator(m, lay).reset();
        m.set(ValueLayout.JAVA_LONG, H_MAGIC, MAGIC);
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

    /** The file's layout, after checking every header field this build relies on. */
    private static ShmLayout validate(Path path, MemorySegment m, String uri) {
        checkFormat(path, m, uri);
        ShmLayout lay = layoutOf(path, m, uri);
        checkSharers(path, m, uri);
        return lay;
    }

    /** The magic and the format version: a file of another version is refused, naming both versions. */
    private static void checkFormat(Path path, MemorySegment m, String uri) {
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
        int procs = m.get(ValueLayout.JAVA_INT, H_PROC_SLOTS);
        int leases = m.get(ValueLayout.JAVA_INT, H_LEASES_PER_PROC);
        if (procs != PROC_SLOTS || leases != LEASES_PER_PROC) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has " + procs + " process slots of " + leases
                    + " leases; this build uses " + PROC_SLOTS + " of " + LEASES_PER_PROC);
        }
    }

    /** The layout that the header's sizes give, checked against every region offset the header records. */
    private static ShmLayout layoutOf(Path path, MemorySegment m, String uri) {
        long capacity = m.get(ValueLayout.JAVA_LONG, H_CAPACITY);
        long block = m.get(ValueLayout.JAVA_LONG, H_BLOCK_SIZE);
        long entries = m.get(ValueLayout.JAVA_LONG, H_ENTRY_COUNT);
        long ring = m.get(ValueLayout.JAVA_LONG, H_RING_BYTES);
        ShmLayout lay = ShmLayout.of(capacity, block, entries, ring);
        if (lay == null || lay.capacity() != capacity) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "has sizes out of range: capacity=" + capacity
                    + " bytes, block=" + block + " bytes, entries=" + entries + ", event ring=" + ring + " bytes");
        }
        long[][] fields = {
                {H_FILE_SIZE, lay.fileSize()}, {H_SLOT_COUNT, lay.slotCount()},
                {H_BITMAP_OFFSET, lay.bitmapOffset()}, {H_PROC_OFFSET, lay.procOffset()},
                {H_INDEX_OFFSET, lay.indexOffset()}, {H_ENTRY_OFFSET, lay.entryOffset()},
                {H_RING_OFFSET, lay.ringOffset()}, {H_PAYLOAD_OFFSET, lay.payloadOffset()}};
        String[] names = {"file size", "index slots", "bitmap offset", "process table offset", "index offset",
                "entry table offset", "event ring offset", "payload offset"};
        for (int i = 0; i < fields.length; i++) {
            long stored = m.get(ValueLayout.JAVA_LONG, fields[i][0]);
            if (stored != fields[i][1]) {
                throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "records " + names[i] + " " + stored
                        + ", but its sizes (capacity=" + capacity + ", block=" + block + ", entries=" + entries
                        + ", events=" + ring + ") give " + fields[i][1]);
            }
        }
        if (m.byteSize() != lay.fileSize()) {
            throw refuse(ErrorCode.CORRUPT_OBJECT, path, uri, "is " + m.byteSize() + " bytes, but its header says "
                    + lay.fileSize() + " (truncated or extended)");
        }
        return lay;
    }

    /** The creator's uid and pid namespace: sharers must be one user, and see each other's pids. */
    private static void checkSharers(Path path, MemorySegment m, String uri) {
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

}
