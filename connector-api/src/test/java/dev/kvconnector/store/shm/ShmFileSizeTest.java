package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link ShmFileSize}'s contract: the size is the open file's, asked now; a fault means a truncation only when the file
 * is shorter than its mapping; the error names the file, both sizes, what is lost and the likely cause; long copies
 * are checked again afterwards, short ones are not.
 */
class ShmFileSizeTest {
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

    private static void truncate(Path p, long size) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
            ch.truncate(size);
        }
    }

    @Test
    void aFaultIsATruncationOnlyWhenTheFileIsShorterThanItsLayout() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            InternalError fault = new InternalError("a fault occurred in an unsafe memory access operation");
            assertNull(f.size().truncated(fault, "get", ShmRig.key("k")), "full size: the fault is something else");
            truncate(p, 8192);
            assertEquals(8192, f.size().now(), "the size is the open file's, asked now");
            KVException e = f.size().truncated(fault, "get", ShmRig.key("k"));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains(p + " is 8192 bytes, but this store mapped it at " + LAYOUT.fileSize()
                    + " bytes: another process truncated or replaced it while the store was open")
                    && e.getMessage().contains("(key k)"), e.getMessage());
            assertTrue(e.hint().contains("find what truncated or overwrote " + p), e.hint());
            assertEquals(fault, e.getCause());
            assertEquals(e.getMessage(), assertThrows(KVException.class, () -> {
                throw f.size().named(fault, "get", ShmRig.key("k"));
            }).getMessage(), "a fault reaching the store's boundary is named the same way");
        }
        try (ShmFile f = ShmFile.open(dir.resolve("whole"), LAYOUT, "shm:/f")) {
            InternalError fault = new InternalError("another fault");
            assertEquals(fault, assertThrows(InternalError.class, () -> f.size().named(fault, "get", ShmRig.key("k"))),
                    "a fault on a whole file is rethrown as it is");
        }
    }

    @Test
    void aCopyOfAtLeast64KiBIsCheckedAgainstTheSizeAfterwardsAndAShorterOneIsNot() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            long end = LAYOUT.fileSize();
            f.size().recheck(end, ShmFileSize.RECHECK_BYTES, "put", ShmRig.key("k"));
            truncate(p, end - 4096);
            f.size().recheck(end, ShmFileSize.RECHECK_BYTES - 1, "put", ShmRig.key("k"));
            KVException e = assertThrows(KVException.class,
                    () -> f.size().recheck(end, ShmFileSize.RECHECK_BYTES, "put", ShmRig.key("k")));
            assertEquals(ErrorCode.CORRUPT_OBJECT, e.code());
            assertTrue(e.getMessage().contains("is " + (end - 4096) + " bytes"), e.getMessage());
            f.size().recheck(end - 4096, ShmFileSize.RECHECK_BYTES, "put", ShmRig.key("k"));
        }
    }

    @Test
    void aCutIntoTheTablesIsToldFromACutThroughThePayload() throws IOException {
        Path p = dir.resolve("f");
        try (ShmFile f = ShmFile.open(p, LAYOUT, "shm:/f")) {
            ShmFileSize size = f.size();
            assertTrue(size.holdsTables(LAYOUT.payloadOffset()));
            assertFalse(size.holdsTables(LAYOUT.payloadOffset() - 1));
            assertTrue(size.cutShort(LAYOUT.payloadOffset(), "get", ShmRig.key("k"), null).getMessage()
                    .contains("values stored past byte " + LAYOUT.payloadOffset() + " are lost; those before it can "
                            + "still be read"));
            assertTrue(size.cutShort(4096, "get", ShmRig.key("k"), null).getMessage()
                    .contains("the store's tables are lost with it, so no value can be read"));
            assertTrue(size.cutShort(-1, "get", ShmRig.key("k"), null).getMessage()
                    .contains(p + " is unreadable (-1)"));
        }
    }

    @Test
    void aFileThatChangedSizeBetweenItsMappingAndItsSecondOpenIsRefused() throws IOException {
        Path p = dir.resolve("f");
        ShmFile.open(p, LAYOUT, "shm:/f").close();
        truncate(p, LAYOUT.fileSize() - 4096);
        KVException e = assertThrows(KVException.class, () -> ShmFileSize.open(p, LAYOUT, "shm:/f"));
        assertEquals(ErrorCode.IO_ERROR, e.code());
        assertTrue(e.getMessage().contains(p + " changed size from " + LAYOUT.fileSize() + " to "
                + (LAYOUT.fileSize() - 4096)), e.getMessage());
    }
}
