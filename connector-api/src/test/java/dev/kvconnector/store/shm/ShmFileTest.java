package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ShmFileTest {
    private static final ShmLayout LAYOUT = ShmLayout.of(1 << 20, 4096, 1024);
    private Path dir;

    @BeforeEach
    void makeDir() throws IOException {
        dir = ShmTestFiles.newDir();
    }

    @AfterEach
    void cleanUp() throws IOException {
        ShmTestFiles.delete(dir);
    }

    @Test
    void aNewFileIsPrivateSizedAndInitializedAndReopensWithTheSameLayout() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            assertEquals(LAYOUT, f.layout());
            assertEquals(LAYOUT.fileSize(), f.map().byteSize());
            assertEquals(ShmLayout.MAGIC, f.map().get(ValueLayout.JAVA_LONG, ShmLayout.H_MAGIC));
            assertEquals(0, new BlockAllocator(f.map(), f.layout()).usedBlocks());
            assertTrue(f.readOnly().isReadOnly());
            f.map().set(ValueLayout.JAVA_LONG, LAYOUT.payloadOffset(), 42);
        }
        assertEquals(Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE),
                Files.getPosixFilePermissions(p));
        try (ShmFile again = ShmFile.open(p, ShmLayout.of(1 << 21, 4096, 2048), "shm:/f")) {
            assertEquals(LAYOUT, again.layout(), "an existing file keeps its own sizes");
            assertEquals(42, again.map().get(ValueLayout.JAVA_LONG, LAYOUT.payloadOffset()));
        }
        try (var names = Files.list(dir)) {
            assertEquals(1, names.count(), "no temporary file is left beside it");
        }
    }

    @Test
    void aFileOfAnotherVersionIsRefusedNamingTheFileAndBothVersions() {
        for (int other : new int[] {ShmLayout.VERSION - 1, ShmLayout.VERSION + 1}) {
            Path p = dir.resolve("f" + other);
            try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
                f.map().set(ValueLayout.JAVA_INT, ShmLayout.H_VERSION, other);
            }
            KVException e = assertThrows(KVException.class, () -> ShmFile.open(p, LAYOUT, "shm:/f"));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains(p + " has format version " + other)
                    && e.getMessage().contains("this build reads version " + ShmLayout.VERSION), e.getMessage());
        }
    }

    @Test
    void aFaultIsATruncationOnlyWhenTheFileIsShorterThanItsLayout() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            InternalError fault = new InternalError("a fault occurred in an unsafe memory access operation");
            assertNull(f.truncated(fault, "get", "k"), "full size: the fault is something else");
            try (var ch = java.nio.channels.FileChannel.open(p, java.nio.file.StandardOpenOption.WRITE)) {
                ch.truncate(8192);
            }
            assertEquals(8192, f.sizeNow(), "the size is the open file's, asked now");
            KVException e = f.truncated(fault, "get", "k");
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains(p + " is 8192 bytes, but this store mapped it at " + LAYOUT.fileSize()
                    + " bytes: another process truncated or replaced it while the store was open")
                    && e.getMessage().contains("(key k)"), e.getMessage());
            assertTrue(e.hint().contains("find what truncated or overwrote " + p), e.hint());
            assertEquals(fault, e.getCause());
            assertEquals(e.getMessage(), assertThrows(KVException.class, () -> {
                throw f.named(fault, "get", "k");
            }).getMessage(), "a fault reaching the store's boundary is named the same way");
        }
        try (ShmFile f = ShmFile.open(dir.resolve("whole"), LAYOUT, "shm:/f")) {
            InternalError fault = new InternalError("another fault");
            assertEquals(fault, assertThrows(InternalError.class, () -> f.named(fault, "get", "k")),
                    "a fault on a whole file is rethrown as it is");
        }
    }

    @Test
    void aCopyOfAtLeast64KiBIsCheckedAgainstTheSizeAfterwardsAndAShorterOneIsNot() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            long end = LAYOUT.fileSize();
            f.recheck(end, ShmFile.RECHECK_BYTES, "put", "k");
            try (var ch = java.nio.channels.FileChannel.open(p, java.nio.file.StandardOpenOption.WRITE)) {
                ch.truncate(end - 4096);
            }
            f.recheck(end, ShmFile.RECHECK_BYTES - 1, "put", "k");
            KVException e = assertThrows(KVException.class, () -> f.recheck(end, ShmFile.RECHECK_BYTES, "put", "k"));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains("is " + (end - 4096) + " bytes"), e.getMessage());
            f.recheck(end - 4096, ShmFile.RECHECK_BYTES, "put", "k");
        }
    }
}
