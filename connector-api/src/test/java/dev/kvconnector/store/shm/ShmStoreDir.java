package dev.kvconnector.store.shm;

import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A JUnit extension ({@code @RegisterExtension}) that gives each test a fresh directory for {@code shm:} files and an
 * arena for its values, and after the test closes every store it opened, the arena, and deletes the directory.
 */
final class ShmStoreDir implements BeforeEachCallback, AfterEachCallback {
    private final List<ShmStore> opened = new ArrayList<>();
    private Path dir;
    private Arena arena;

    @Override
    public void beforeEach(ExtensionContext context) throws IOException {
        dir = ShmTestFiles.newDir();
        arena = Arena.ofConfined();
    }

    @Override
    public void afterEach(ExtensionContext context) throws IOException {
        opened.forEach(ShmStore::close);
        opened.clear();
        arena.close();
        ShmTestFiles.delete(dir);
    }

    /** The store {@code shm:/NAME?OPTIONS} in this test's directory, closed after the test. */
    ShmStore open(String name, String options) {
        ShmStore s = ShmStore.open(StoreUri.parse("shm:/" + name + "?dir=" + dir + (options.isEmpty() ? "" : "&")
                + options));
        opened.add(s);
        return s;
    }

    /** The test's arena, closed after it. */
    Arena arena() {
        return arena;
    }
}
