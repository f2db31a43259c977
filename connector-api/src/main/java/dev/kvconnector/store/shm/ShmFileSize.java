package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store file's size while a store has it mapped, and the error that names a file found shorter than the mapping.
 *
 * <p>Why the size is watched: no store ever shrinks its file, but another process can ({@code truncate}, a
 * {@code cp} or {@code >} onto it). An access to a page of the mapping past the new end then raises SIGBUS. The JVM
 * turns that into an {@link InternalError} for plain loads, stores and copies, but a compare-and-set run by the
 * interpreter faults inside the VM and stops the JVM, and in compiled code the error is raised only at the next
 * safepoint poll, possibly after the store's call has returned. So the store asks the file's size ({@link #now()},
 * an {@code fstat} of the open file) before it touches the mapping ({@link CallGate}), refuses what the file no longer
 * covers ({@link #cutShort}), and names a fault that a truncation racing a call causes ({@link #named}).
 */
final class ShmFileSize implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShmFileSize.class);
    /** Copies from this many bytes on are followed by a second size check ({@link #recheck}): 64 KiB, 2 to 4 us. */
    static final long RECHECK_BYTES = 64 << 10;

    private final Path path;
    private final String uri;
    private final ShmLayout layout;
    /** The file opened once more, read-only, for {@link #now()}: not a channel, which an interrupt closes. */
    private final RandomAccessFile file;

    private ShmFileSize(Path path, String uri, ShmLayout layout, RandomAccessFile file) {
        this.path = path;
        this.uri = uri;
        this.layout = layout;
        this.file = file;
    }

    /**
     * Opens the file again to watch its size, right after it was mapped and checked as {@code layout}. Checked to be
     * as long as the mapping: a file replaced between the two opens is refused (a replacement of the same size within
     * those microseconds would go unseen, and only its truncation detection would watch the wrong file).
     *
     * @throws KVException IO_ERROR when the file cannot be opened again or changed size meanwhile
     */
    static ShmFileSize open(Path path, ShmLayout layout, String uri) {
        RandomAccessFile raf = null;
        try {
            raf = new RandomAccessFile(path.toFile(), "r");
            long size = raf.length();
            if (size != layout.fileSize()) {
                throw KVException.of(ErrorCode.IO_ERROR, path + " changed size from " + layout.fileSize() + " to "
                        + size + " bytes while it was being opened: another process is replacing or truncating it")
                        .store(uri).operation("open").hint("find that process; open again once it is done").build();
            }
            return new ShmFileSize(path, uri, layout, raf);
        } catch (IOException e) {
            closeQuietly(raf);
            throw KVException.of(ErrorCode.IO_ERROR, "cannot open " + path + " again to watch its size: " + e)
                    .store(uri).operation("open").cause(e).hint("another process deleted it; open again").build();
        } catch (RuntimeException e) {
            closeQuietly(raf);
            throw e;
        }
    }

    /**
     * The file's size in bytes now, from an {@code fstat} of the open file: no allocation, about 0.2 us alone and 0.25
     * to 0.35 us added to a store call (the project's 2-vCPU VM at load 4 to 5). -1 when it cannot be read.
     */
    long now() {
        try {
            return file.length();
        } catch (IOException e) {
            return -1;
        }
    }

    /** Whether a file of {@code size} bytes still holds the store's header and tables (all but the payload). */
    boolean holdsTables(long size) {
        return size >= layout.payloadOffset();
    }

    /**
     * Fails when a file of {@code size} bytes (as a call found it) ends before file offset {@code end}, the end of
     * what the call is about to touch.
     *
     * @throws KVException CORRUPT_OBJECT from {@link #cutShort}
     */
    void requireCovers(long size, long end, String op, KeyScratch key) {
        if (size < end) {
            throw cutShort(size, op, key, null);
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
    void recheck(long end, long len, String op, KeyScratch key) {
        if (len >= RECHECK_BYTES) {
            requireCovers(now(), end, op, key);
        }
    }

    /**
     * What a fault on the mapping (the JVM's {@link InternalError} for SIGBUS) means: the truncation error of
     * {@link #cutShort} when the file is now shorter than the mapping, else null (the caller decides: a write into a
     * sparse tmpfs file also faults when the tmpfs has no page left).
     */
    KVException truncated(InternalError fault, String op, KeyScratch key) {
        long size = now();
        return size >= layout.fileSize() ? null : cutShort(size, op, key, fault);
    }

    /**
     * {@code fault}, a fault on the mapping that reached the store's boundary, as the store reports it: the truncation
     * error when the file is now shorter than the mapping, else {@code fault} itself, rethrown. The store's calls catch
     * it there because compiled code raises such a fault at its next safepoint poll, which may lie in any frame of the
     * call (a return from a method compiled on its own), not only around the copy that took it.
     */
    RuntimeException named(InternalError fault, String op, KeyScratch key) {
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
     * @param key the key the call is about, or null
     * @param cause the fault that revealed it, or null
     */
    KVException cutShort(long size, String op, KeyScratch key, Throwable cause) {
        String lost = holdsTables(size) ? "values stored past byte " + size + " are lost; those before it can still be "
                + "read" : "the store's tables are lost with it, so no value can be read";
        return KVException.of(ErrorCode.CORRUPT_OBJECT, path + " is " + (size < 0 ? "unreadable (" + size + ")"
                : size + " bytes") + ", but this store mapped it at " + layout.fileSize() + " bytes: another process "
                + "truncated or replaced it while the store was open; " + lost).store(uri).operation(op)
                .key(KeyScratch.textOf(key)).cause(cause).hint("no store shrinks its file: find what truncated or "
                        + "overwrote " + path + " (a truncate, cp or > onto it), then close every store on it, delete "
                        + "it and open again to create a fresh store").build();
    }

    @Override
    public void close() {
        closeQuietly(file);
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
}
