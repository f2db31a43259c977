package dev.kvconnector.kvctl;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/** Files mapped as segments, so object bytes never pass through the Java heap. */
final class ObjectFiles {
    private ObjectFiles() {
    }

    static MemorySegment mapForRead(Path file, Arena arena) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot read " + file + ": " + reason(e)).build();
        }
    }

    /**
     * Maps {@code size} bytes of an existing, empty file for writing (a zero-size segment for 0 bytes). The file
     * grows sparse to {@code size}; the caller has checked the free space.
     */
    static MemorySegment mapForWrite(Path file, long size, Arena arena) throws IOException {
        if (size == 0) {
            return arena.allocate(0);
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        }
    }

    /** What went wrong with a file, in words: the JDK's messages for these exceptions are just the path. */
    static String reason(IOException e) {
        String why = switch (e) {
            case NoSuchFileException x -> "no such file or directory";
            case AccessDeniedException x -> "permission denied";
            case NotDirectoryException x -> "not a directory";
            case FileSystemException x -> x.getReason();
            default -> e.getMessage();
        };
        return why == null ? e.getClass().getSimpleName() : why;
    }
}
