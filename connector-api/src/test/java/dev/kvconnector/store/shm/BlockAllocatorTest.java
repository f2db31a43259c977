package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class BlockAllocatorTest {
    /** 100 blocks: the bitmap's second word has 36 bits past the end. */
    private final ShmPartsBench b = new ShmPartsBench(100 * 64, 64, 16, true);
    private final BlockAllocator blocks = b.blocks;

    @AfterEach
    void close() {
        b.close();
    }

    @Test
    void allocationIsNextFitAndCounted() {
        assertEquals(0, blocks.allocate(10));
        assertEquals(10, blocks.allocate(70), "a run across two bitmap words");
        assertEquals(80, blocks.allocate(5));
        assertEquals(85, blocks.usedBlocks());
        assertFalse(blocks.isFree(79, 1));
        assertTrue(blocks.isFree(85, 15));
    }

    @Test
    void blocksPastTheEndAreNeverHandedOut() {
        assertEquals(0, blocks.allocate(100));
        assertEquals(-1, blocks.allocate(1));
        blocks.free(0, 100);
        assertEquals(-1, blocks.allocate(101));
        assertEquals(0, blocks.usedBlocks());
    }

    @Test
    void aFreedRunIsReusedBeforeFreshBlocks() {
        blocks.allocate(20);
        blocks.allocate(20);
        blocks.allocate(20);
        blocks.free(20, 20);
        blocks.free(0, 20);
        assertEquals(0, blocks.allocate(30), "from the lowest run freed, where the pages are already touched");
        assertEquals(30, blocks.allocate(10));
        assertEquals(60, blocks.allocate(10), "then on past the blocks in use");
    }

    @Test
    void noRunLongEnoughGivesMinusOneAndTakesNothing() {
        blocks.allocate(40);
        blocks.allocate(20);
        blocks.allocate(40);
        blocks.free(40, 20);
        assertEquals(-1, blocks.allocate(21));
        assertEquals(80, blocks.usedBlocks());
        assertEquals(40, blocks.allocate(20));
    }

    @Test
    void emptyValuesTakeNoBlock() {
        assertEquals(0, blocks.allocate(0));
        assertEquals(0, blocks.usedBlocks());
        assertEquals(0, blocks.allocate(1), "block 0 is still free");
    }

    @Test
    void resetThenMarkUsedRebuildsTheBitmapAndTheCount() {
        blocks.allocate(50);
        blocks.reset();
        assertEquals(0, blocks.usedBlocks());
        blocks.markUsed(10, 5);
        assertEquals(5, blocks.usedBlocks());
        assertEquals(0, blocks.allocate(10));
        assertEquals(15, blocks.allocate(1), "the marked run is skipped");
    }
}
