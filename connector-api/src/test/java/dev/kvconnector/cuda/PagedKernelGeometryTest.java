package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.cuda.PagedKernelGeometry.Direction;
import dev.kvconnector.cuda.PagedKernelGeometry.Index;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class PagedKernelGeometryTest {
    private static final long ALIGNED = 0x7f00_0000_0000L;

    @Test
    void llama3RequestMovesKAndVIn16ByteVectorsTwoTokensPerCta() {
        KVLayout l = KVLayout.preset("llama3-8b");
        PagedKernelGeometry g = PagedKernelGeometry.plan(Direction.GATHER, Index.BLOCKS, 1024,
                l.bytesPerTokenPerTensor(), l.tensorsPerLayer(), ALIGNED, ALIGNED + 4096, ALIGNED + 8192);
        assertEquals(new PagedKernelGeometry("kvc_gather_blocks_v16", 16, 128, 2, 512, 2), g);
        assertEquals(256, g.threadsPerBlock());
    }

    @Test
    void mlaLatentIsOneTensorWithRowsOf72Vectors() {
        KVLayout l = KVLayout.preset("deepseek-v3-mla");
        PagedKernelGeometry g = PagedKernelGeometry.plan(Direction.SCATTER, Index.SLOTS, 100,
                l.bytesPerTokenPerTensor(), l.tensorsPerLayer(), ALIGNED);
        assertEquals(new PagedKernelGeometry("kvc_scatter_slots_v16", 16, 96, 2, 50, 1), g);
    }

    @Test
    void fp8RowsOf1024BytesPackFourTokensPerCta() {
        PagedKernelGeometry g = PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 10, 8 * 128, 2, ALIGNED);
        assertEquals(64, g.blockX());
        assertEquals(4, g.blockY());
        assertEquals(3, g.gridX());
    }

    @Test
    void vectorWidthFallsBackWhenRowSizeOrAnAddressIsMisaligned() {
        assertEquals(4, PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1, 2048, 2, ALIGNED, ALIGNED + 4)
                .vectorBytes());
        assertEquals("kvc_gather_slots_v1", PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1, 2048, 1,
                ALIGNED + 2).entry());
        assertEquals(4, PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1, 12, 1, ALIGNED).vectorBytes());
        assertEquals(1, PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1, 7, 1, ALIGNED).vectorBytes());
    }

    @Test
    void smallRowsStillUseAFullWarpAndLargeRowsCapAtTargetThreads() {
        PagedKernelGeometry small = PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1000, 16, 1);
        assertEquals(32, small.blockX());
        assertEquals(8, small.blockY());
        PagedKernelGeometry large = PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 3, 1 << 20, 2);
        assertEquals(PagedKernelGeometry.TARGET_THREADS, large.blockX());
        assertEquals(1, large.blockY());
        assertEquals(3, large.gridX());
    }

    @Test
    void zeroTokensIsAnEmptyLaunchAndFewTokensShrinkTheCta() {
        assertTrue(PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 0, 2048, 2).empty());
        PagedKernelGeometry one = PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1, 16, 1);
        assertEquals(1, one.blockY());
        assertEquals(1, one.gridX());
    }

    @Test
    void rejectsNegativeTokensZeroRowBytesAndThreeTensors() {
        KVException e = assertThrows(KVException.class,
                () -> PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, -1, 2048, 2));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("tokens=-1"), e.getMessage());
        assertTrue(assertThrows(KVException.class, () -> PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1,
                0, 2)).getMessage().contains("tokenBytes=0"));
        assertTrue(assertThrows(KVException.class, () -> PagedKernelGeometry.plan(Direction.GATHER, Index.SLOTS, 1,
                16, 3)).getMessage().contains("tensors=3"));
    }

    @Property(tries = 500)
    void everyPlanCoversEveryTokenOnceWithLegalShapes(@ForAll @IntRange(min = 1, max = 2_000_000) int tokens,
            @ForAll @LongRange(min = 1, max = 1 << 22) long tokenBytes, @ForAll @IntRange(min = 1, max = 2) int tensors,
            @ForAll @LongRange(min = 0, max = 1 << 20) long addressOffset) {
        PagedKernelGeometry g = PagedKernelGeometry.plan(Direction.SCATTER, Index.BLOCKS, tokens, tokenBytes, tensors,
                ALIGNED + addressOffset);
        assertEquals(0, g.blockX() % 32);
        assertTrue(g.blockX() >= 32 && g.threadsPerBlock() <= PagedKernelGeometry.TARGET_THREADS, g.toString());
        assertTrue((long) g.gridX() * g.blockY() >= tokens && (long) (g.gridX() - 1) * g.blockY() < tokens,
                g.toString());
        assertEquals(0, tokenBytes % g.vectorBytes());
        assertEquals(0, (ALIGNED + addressOffset) % g.vectorBytes());
        assertEquals(tensors, g.gridY());
        assertTrue(PagedKvPtx.expectedEntries().contains(g.entry()), g.entry());
    }
}
