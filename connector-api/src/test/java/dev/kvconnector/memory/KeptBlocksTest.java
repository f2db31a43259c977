package dev.kvconnector.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class KeptBlocksTest {
    @Test
    void takesOnlyABlockOfExactlyTheSizeAndCountsWhatItKeeps() {
        try (Arena arena = Arena.ofConfined()) {
            KeptBlocks<MemorySegment> kept = new KeptBlocks<>(MemorySegment::byteSize);
            MemorySegment a = arena.allocate(128 << 10);
            MemorySegment b = arena.allocate(256 << 10);
            kept.keep(a);
            kept.keep(b);
            assertEquals(384 << 10, kept.bytes());
            assertNull(kept.take(192 << 10), "no block of another size is handed out");
            assertSame(b, kept.take(256 << 10));
            assertNull(kept.take(256 << 10));
            assertEquals(128 << 10, kept.bytes());
            assertSame(a, kept.dropOne());
            assertNull(kept.dropOne());
            assertEquals(0, kept.bytes());
        }
    }

    @Test
    void drainHandsEveryBlockBackAndKeepsNothing() {
        try (Arena arena = Arena.ofConfined()) {
            KeptBlocks<MemorySegment> kept = new KeptBlocks<>(MemorySegment::byteSize);
            kept.keep(arena.allocate(64 << 10));
            kept.keep(arena.allocate(64 << 10));
            kept.keep(arena.allocate(1 << 20));
            List<MemorySegment> out = new ArrayList<>();
            kept.drainTo(out);
            assertEquals(3, out.size());
            assertEquals(0, kept.bytes());
            assertTrue(kept.take(64 << 10) == null && kept.dropOne() == null);
        }
    }

    @Test
    void keepingAndTakingBlocksOfTheSameSizesMakesNoObject() {
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        try (Arena arena = Arena.ofConfined()) {
            KeptBlocks<MemorySegment> kept = new KeptBlocks<>(MemorySegment::byteSize);
            MemorySegment layer = arena.allocate(4 << 20);
            MemorySegment chunk = arena.allocate(1 << 20);
            long best = Long.MAX_VALUE;
            int cycles = 10_000;
            for (int round = 0; round < 20; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < cycles; i++) {
                    kept.keep(layer);
                    kept.keep(chunk);
                    assertSame(layer, kept.take(4 << 20));
                    assertSame(chunk, kept.take(1 << 20));
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            assertTrue(best < cycles, cycles + " keep-and-take cycles allocated " + best + " bytes");
        }
    }
}
