package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.function.Executable;

/**
 * The operations of a store ({@link ShmReader}, {@link ShmWriter}, their handles and the {@link CallGate}) over a real
 * file in a fresh directory, wired as {@link ShmStore} wires them but without the facade, for the tests of those
 * parts. Close it after the test: it frees what the test left open, unmaps the file and deletes the directory.
 */
final class ShmRig implements AutoCloseable {
    final Path dir;
    final ShmOptions options;
    final ShmFile file;
    final ShmLayout lay;
    final ShmParts parts;
    final int procSlot;
    final CallGate gate;
    final ShmReader reader;
    final ShmWriter writer;
    /** The owner of this rig's handles, as the store is of a store's. */
    final Object owner = new Object();
    final Arena arena = Arena.ofConfined();

    private ShmRig(Path dir, ShmOptions options) {
        this.dir = dir;
        this.options = options;
        this.file = ShmFile.open(options.path(), options.wanted(), options.uri());
        this.lay = file.layout();
        this.parts = new ShmParts(file.map(), lay, file.path(), options.uri(), options.lockTimeoutMillis(),
                options.evictLive());
        this.procSlot = parts.leases.claimSlotOrThrow(file.path(), options.uri());
        this.gate = new CallGate(file, options.uri());
        this.reader = new ShmReader(file, parts, procSlot, options.uri());
        this.writer = new ShmWriter(file, parts, reader, options);
    }

    /** A rig over a new store file {@code shm:/rig?OPTIONS} in a fresh directory. */
    static ShmRig open(String uriOptions) throws IOException {
        Path dir = ShmTestFiles.newDir();
        return new ShmRig(dir, ShmOptions.parse(StoreUri.parse("shm:/rig?dir=" + dir
                + (uriOptions.isEmpty() ? "" : "&" + uriOptions))));
    }

    String uri() {
        return options.uri();
    }

    /** The whole mapping, read-write. */
    MemorySegment map() {
        return file.map();
    }

    /** Asserts that {@code call} fails with a {@link KVException} of {@code code}, and returns it. */
    static KVException assertKv(ErrorCode code, Executable call) {
        KVException e = assertThrows(KVException.class, call);
        assertEquals(code, e.code(), e.getMessage());
        return e;
    }

    /** {@code key} encoded in this thread's scratch. */
    static KeyScratch key(String key) {
        return KeyScratch.of(key, "test", "shm:/rig");
    }

    /** A {@link ValuePattern} value of {@code len} bytes. */
    MemorySegment pattern(long len, long seed) {
        MemorySegment v = arena.allocate(len, 8);
        ValuePattern.fill(v, len, seed);
        return v;
    }

    /** Puts a pattern value through the writer, with the file's size as a call would enter with it. */
    boolean put(String key, long len, long seed, PutOptions options) {
        return writer.put(key(key), pattern(len, seed), options, file.size().now());
    }

    boolean put(String key, long len, long seed) {
        return put(key, len, seed, PutOptions.DEFAULT);
    }

    /** Reads {@code key} through the reader and checks that it is the pattern value of {@code len} and {@code seed}. */
    void assertValue(String key, long len, long seed) {
        MemorySegment dst = arena.allocate(len, 8);
        assertEquals(len, reader.getInto(key(key), dst, file.size().now()), key);
        assertNull(ValuePattern.verify(dst, len), key);
        assertEquals(seed, ValuePattern.seed(dst), key);
    }

    /** A claim handle of this rig. */
    ShmClaim newClaim() {
        return new ShmClaim(owner, uri(), gate, writer);
    }

    /** A view handle of this rig. */
    ShmView newView() {
        return new ShmView(owner, uri(), gate, reader);
    }

    /** Claims through the writer, with the file's size as a call would enter with it. */
    int claim(String key, long bytes, PutOptions options, ShmClaim c) {
        return writer.claim(key(key), bytes, options, c, file.size().now());
    }

    /** Views through the reader, with the file's size as a call would enter with it. */
    long view(String key, ShmView v) {
        return reader.view(key(key), v, file.size().now());
    }

    /** Free payload blocks. */
    long freeBlocks() {
        return lay.blockCount() - parts.blocks.usedBlocks();
    }

    /** Entry of {@code key} in the index, or -1; takes the lock. */
    int entryOf(String key) {
        parts.lock.lock();
        try {
            long slot = parts.index.find(key(key));
            return slot < 0 ? -1 : parts.index.entryAt(slot);
        } finally {
            parts.lock.unlock();
        }
    }

    /** Truncates the file to {@code size} bytes, as another process could. */
    void truncate(long size) throws IOException {
        try (FileChannel ch = FileChannel.open(file.path(), StandardOpenOption.WRITE)) {
            ch.truncate(size);
        }
    }

    /**
     * Closes as the store does: the gate first, then (when the file still holds its tables) what this instance left
     * open and its process slot, then the mapping; deletes the directory.
     */
    @Override
    public void close() throws IOException {
        gate.close();
        if (file.size().now() >= lay.payloadOffset()) {
            writer.freeAtClose(procSlot);
            parts.leases.releaseSlot(procSlot);
        }
        file.close();
        arena.close();
        ShmTestFiles.delete(dir);
    }
}
