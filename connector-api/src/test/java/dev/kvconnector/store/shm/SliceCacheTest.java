package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * {@link SliceCache}'s contract: a slice asked for again is the same object, any other offset or length is a new
 * slice over exactly those bytes of the base with its access mode, and a set that overflows keeps its most recently
 * used slices.
 */
class SliceCacheTest {

    @Test
    void theSameRunIsTheSameSliceAndAnyOtherIsItsOwnSliceOfTheBase() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment base = arena.allocate(1 << 20, 4096);
            base.set(ValueLayout.JAVA_LONG, 8192, 42L);
            SliceCache cache = new SliceCache(base, 1024);
            MemorySegment s = cache.slice(8192, 4096);
            assertEquals(base.address() + 8192, s.address());
            assertEquals(4096, s.byteSize());
            assertEquals(42L, s.get(ValueLayout.JAVA_LONG, 0));
            assertSame(s, cache.slice(8192, 4096));
            MemorySegment shorter = cache.slice(8192, 100);
            assertNotSame(s, shorter);
            assertEquals(100, shorter.byteSize());
            assertSame(s, cache.slice(8192, 4096), "both lengths at one offset stay cached (two ways)");
            assertEquals(base.address() + 12_288, cache.slice(12_288, 4096).address());
            assertEquals(0, cache.slice(0, 0).byteSize());
        }
    }

    @Test
    void slicesOfAReadOnlyBaseAreReadOnly() {
        try (Arena arena = Arena.ofConfined()) {
            SliceCache cache = new SliceCache(arena.allocate(1 << 16).asReadOnly(), 16);
            assertTrue(cache.slice(4096, 4096).isReadOnly());
        }
    }

    @Test
    void aSetThatOverflowsKeepsItsMostRecentlyUsedSlices() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment base = arena.allocate(1 << 20, 4096);
            SliceCache cache = new SliceCache(base, 16);
            MemorySegment a = cache.slice(0, 64);
            MemorySegment b = cache.slice(0, 128);
            assertSame(a, cache.slice(0, 64), "a is used again: b is now the least recently used");
            MemorySegment c = cache.slice(0, 256);
            assertSame(a, cache.slice(0, 64), "the third slice of the set evicted b, not a");
            assertSame(c, cache.slice(0, 256));
            assertNotSame(b, cache.slice(0, 128), "b was evicted and is sliced anew");
        }
    }

    @Test
    void aSteadyStreamOfTheSameRunsAllocatesNothing() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment base = arena.allocate(64 << 20, 4096);
            SliceCache cache = new SliceCache(base, 1024);
            com.sun.management.ThreadMXBean mx =
                    (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
            long least = Long.MAX_VALUE;
            long sink = 0;
            for (int round = 0; round < 6; round++) {
                long before = mx.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < 100_000; i++) {
                    sink += cache.slice((i & 63) * (1L << 20), 1 << 20).byteSize();
                }
                least = Math.min(least, mx.getCurrentThreadAllocatedBytes() - before);
            }
            assertTrue(sink > 0);
            assertTrue(least < 1024, "100,000 slices of 64 runs allocated " + least + " bytes after warm-up");
        }
    }
}
