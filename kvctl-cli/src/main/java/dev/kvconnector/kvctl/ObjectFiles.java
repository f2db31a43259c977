package dev.kvconnector.kvctl;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
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
            throw KVException.of(ErrorCode.IO_ERROR, "cannot read " + file + ": " + e.getMessage()).build();
        }
    }

    static MemorySegment mapForWrite(Path file, long size, Arena arena) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            if (size == 0) {
                return arena.allocate(0);
            }
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        } catch (IOException e) {
            throw KVException.of(ErrorCode.IO_ERROR, "cannot write " + file + ": " + e.getMessage()).build();
        }
    }
}
