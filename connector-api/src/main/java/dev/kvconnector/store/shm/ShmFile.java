package dev.kvconnector.store.shm;

import static dev.kvconnector.store.shm.ShmLayout.*;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
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
 * arena, checking its header against {@link ShmLayout} before any number in it is used as an offset, and unmapping
 * it. Every refusal names the file, what is wrong with it, and the fix. Its size while it is mapped is watched by
 * {@link ShmFileSize}.
 */
final class ShmFile implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShmFile.class);

    private final Path path;
    private final String uri;
    private final Arena arena;
    private final MemorySegment map;
    private final MemorySegment readOnly;
    private final ShmLayout layout;
    private final ShmFileSize size;

    private ShmFile(Path path, String uri, Arena arena, MemorySegment map, ShmLayout layout, ShmFileSize size) {
        this.path = path;
        this.uri = uri;
        this.arena = arena;
        this.map = map;
        this.readOnly = map.asReadOnly();
        this.layout = layout;
        this.size = size;
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
        try {
            MemorySegment map = mapExisting(path, arena, uri);
            ShmLayout layout = validate(path, map, uri);
            return new ShmFile(path, uri, arena, map, layout, ShmFileSize.open(path, layout, uri));
        } catch (RuntimeException e) {
            arena.close();
            throw e;
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

    /** What watches the file's size while it is mapped. */
    ShmFileSize size() {
        return size;
    }

    /** Unmaps the file: every segment sliced from it throws {@link IllegalStateException} from now on. */
    @Override
    public void close() {
        arena.close();
        size.close();
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
