package dev.kvconnector.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class PagedKVCacheTest {

    @Property(tries = 60)
    void gatherThenScatterIntoAnotherBlockTableRestoresEveryToken(
            @ForAll @IntRange(min = 1, max = 4) int heads, @ForAll @IntRange(min = 1, max = 40) int headSize,
            @ForAll @IntRange(min = 1, max = 33) int blockSize, @ForAll @IntRange(min = 1, max = 200) int tokens,
            @ForAll boolean mla, @ForAll long seed) {
        KVLayout layout = new KVLayout("p", mla ? AttentionKind.MLA : AttentionKind.MHA, 2, mla ? 1 : heads, headSize,
                DType.FP16, blockSize, 8);
        int blocks = (tokens + blockSize - 1) / blockSize + 3;
        Random r = new Random(seed);
        try (PagedKVCache src = PagedKVCache.allocate(layout, blocks); PagedKVCache dst = PagedKVCache.allocate(layout, blocks);
             Arena a = Arena.ofConfined()) {
            Segments.fill(src.tensor(1, 0), seed);
            BlockTable table = new BlockTable(shuffled(blocks, r), blockSize, tokens);
            BlockTable other = new BlockTable(shuffled(blocks, r), blockSize, tokens);
            long tb = layout.bytesPerTokenPerTensor();
            MemorySegment flat = a.allocate(tokens * tb + 64);
            int split = r.nextInt(tokens + 1);
            src.gather(1, 0, table, 0, split, flat, 64);
            src.gather(1, 0, table, split, tokens, flat, 64 + split * tb);
            dst.scatter(flat, 64, 1, 0, other, 0, tokens);
            for (int t = 0; t < tokens; t++) {
                assertEquals(-1, MemorySegment.mismatch(src.tensor(1, 0), table.slot(t) * tb, table.slot(t) * tb + tb,
                        dst.tensor(1, 0), other.slot(t) * tb, other.slot(t) * tb + tb), "token " + t);
                assertEquals(-1, MemorySegment.mismatch(src.tensor(1, 0), table.slot(t) * tb, table.slot(t) * tb + tb,
                        flat, 64 + t * tb, 64 + t * tb + tb), "flat token " + t);
            }
        }
    }

    private static int[] shuffled(int n, Random r) {
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ids.add(i);
        }
        Collections.shuffle(ids, r);
        return ids.stream().mapToInt(Integer::intValue).toArray();
    }

    @Test
    void slotOutsideTheCacheIsRejectedWithEveryNumberNamed() {
        KVLayout layout = new KVLayout("p", AttentionKind.MHA, 1, 1, 8, DType.BF16, 4, 8);
        try (PagedKVCache c = PagedKVCache.allocate(layout, 2); Arena a = Arena.ofConfined()) {
            KVException e = assertThrows(KVException.class, () -> c.gather(0, 0, new SlotMapping(new long[] {0, 8}), 0, 2,
                    a.allocate(64), 0));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("slot 8") && e.getMessage().contains("8 slots"), e.getMessage());
            assertThrows(KVException.class, () -> c.gather(0, 0, new SlotMapping(new long[] {-1}), 0, 1, a.allocate(64), 0));
        }
    }

    @Test
    void destinationTooSmallIsAShapeMismatch() {
        KVLayout layout = new KVLayout("p", AttentionKind.MHA, 1, 1, 8, DType.BF16, 4, 8);
        try (PagedKVCache c = PagedKVCache.allocate(layout, 2); Arena a = Arena.ofConfined()) {
            KVException e = assertThrows(KVException.class, () -> c.gather(0, 0, new SlotMapping(new long[] {0, 1}), 0, 2,
                    a.allocate(31), 0));
            assertEquals(ErrorCode.SHAPE_MISMATCH, e.code());
        }
    }

    @Test
    void wrapRefusesSegmentsOfTheWrongSize() {
        KVLayout layout = new KVLayout("p", AttentionKind.MLA, 1, 1, 8, DType.BF16, 4, 8);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment[][] seg = {{a.allocate(layout.blockBytes() * 3 - 1)}};
            assertEquals(ErrorCode.SHAPE_MISMATCH, assertThrows(KVException.class,
                    () -> PagedKVCache.wrap(layout, 3, seg)).code());
        }
    }

    @Test
    void blockTableThatCannotHoldTheTokensIsRejected() {
        assertThrows(KVException.class, () -> new BlockTable(new int[] {1, 2}, 16, 33));
    }
}
