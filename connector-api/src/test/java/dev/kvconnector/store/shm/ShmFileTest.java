package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
}
