package dev.kvconnector.store.shm;

import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One test's {@code shm:} directory, the stores it opened, the child JVMs it started and the values it made, all
 * closed, killed and deleted after the test: the bench of the multi-process tests.
 */
final class ShmProcessBench implements BeforeEachCallback, AfterEachCallback {
    private final String name;
    private final List<ChildJvm> children = new ArrayList<>();
    private final List<ShmStore> opened = new ArrayList<>();
    private Path dir;
    private Arena arena;

    /** A bench whose store file is {@code shm:/NAME} in a fresh directory per test. */
    ShmProcessBench(String name) {
        this.name = name;
    }

    @Override
    public void beforeEach(ExtensionContext context) throws IOException {
        dir = ShmTestFiles.newDir();
        arena = Arena.ofConfined();
    }

    @Override
    public void afterEach(ExtensionContext context) throws Exception {
        for (ChildJvm c : children) {
            c.close();
        }
        children.clear();
        opened.forEach(ShmStore::close);
        opened.clear();
        arena.close();
        ShmTestFiles.delete(dir);
    }

    /** The store's URI with {@code options} ({@code capacity=..&..}). */
    String uri(String options) {
        return "shm:/" + name + "?dir=" + dir + "&" + options;
    }

    /** Opens the store in this JVM; closed after the test. */
    ShmStore open(String options) {
        ShmStore s = ShmStore.open(StoreUri.parse(uri(options)));
        opened.add(s);
        return s;
    }

    /** Starts a child JVM running {@link ShmChild} with {@code args}; killed after the test. */
    ChildJvm child(Map<String, String> props, String... args) throws IOException {
        ChildJvm c = ChildJvm.start(props, args);
        children.add(c);
        return c;
    }

    /** The child JVMs started so far, in start order. */
    List<ChildJvm> children() {
        return children;
    }

    /** The test's arena (confined, closed after the test). */
    Arena arena() {
        return arena;
    }

    /** A value of {@code len} bytes in {@link ValuePattern} {@code seed}. */
    MemorySegment pattern(long len, long seed) {
        MemorySegment v = arena.allocate(len, 8);
        ValuePattern.fill(v, len, seed);
        return v;
    }

    /** Waits up to 15 s for {@code condition}, or fails naming {@code what}. */
    static void awaitTrue(String what, BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + 15_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }
}
