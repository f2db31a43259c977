package dev.kvconnector.paged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import dev.kvconnector.memory.WordSum;
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

    @Property(tries = 200)
    void aBlockTablesRunsAreTheTokensInConsecutiveSlots(@ForAll @IntRange(min = 1, max = 12) int blockCount,
                                                       @ForAll @IntRange(min = 1, max = 5) int blockSize,
                                                       @ForAll long seed) {
        Random r = new Random(seed);
        int[] blocks = new int[blockCount];
        for (int i = 0; i < blockCount; i++) {
            // Runs of consecutive ids, and jumps, and a block id repeated.
            blocks[i] = i > 0 && r.nextInt(3) > 0 ? blocks[i - 1] + (r.nextInt(4) == 0 ? 0 : 1) : r.nextInt(50);
        }
        int tokens = 1 + r.nextInt(blockCount * blockSize);
        BlockTable table = new BlockTable(blocks, blockSize, tokens);
        long[] slots = new long[tokens];
        for (int t = 0; t < tokens; t++) {
            slots[t] = table.slot(t);
        }
        SlotMapping mapping = new SlotMapping(slots);
        for (int from = 0; from < tokens; from++) {
            for (int end = from + 1; end <= tokens; end++) {
                assertEquals(mapping.run(from, end), table.run(from, end),
                        "tokens [" + from + ", " + end + ") of blocks " + java.util.Arrays.toString(blocks) + " x "
                                + blockSize);
            }
        }
    }

    @Test
    void blockTableThatCannotHoldTheTokensIsRejected() {
        assertThrows(KVException.class, () -> new BlockTable(new int[] {1, 2}, 16, 33));
    }

    private static final KVLayout FUSED = new KVLayout("fused", AttentionKind.MHA, 2, 2, 64, DType.FP16, 16, 8);

    /** Gathers K then V of layer 1 into the payload of a raw object, with the fused sum; returns the sum. */
    private static int gatherLayer(PagedKVCache cache, BlockTable table, MemorySegment object, WordSum sum) {
        long tensorBytes = table.tokens() * FUSED.bytesPerTokenPerTensor();
        sum.reset();
        cache.gather(1, 0, table, 0, table.tokens(), object, RawTensorFormat.HEADER_BYTES, sum);
        cache.gather(1, 1, table, 0, table.tokens(), object, RawTensorFormat.HEADER_BYTES + tensorBytes, sum);
        return sum.value();
    }

    private static TensorSpec layerSpec(int tokens) {
        return TensorSpec.of(DType.FP16, 2, tokens, FUSED.kvHeads(), FUSED.headSize());
    }

    @Test
    void fusedGatherComputesThePayloadCrcThatValidateChecksAndFusedScatterVerifiesIt() {
        int tokens = 100;
        Random r = new Random(21);
        try (PagedKVCache src = PagedKVCache.allocate(FUSED, 12); PagedKVCache dst = PagedKVCache.allocate(FUSED, 12);
             Arena a = Arena.ofConfined()) {
            Segments.fill(src.tensor(1, 0), 1);
            Segments.fill(src.tensor(1, 1), 2);
            BlockTable table = new BlockTable(shuffled(12, r), 16, tokens);
            TensorSpec spec = layerSpec(tokens);
            MemorySegment object = a.allocate(RawTensorFormat.encodedSize(spec));
            WordSum sum = new WordSum();
            int payloadSum = gatherLayer(src, table, object, sum);
            RawTensorFormat.writeHeaderWithSum(object, spec, tokens, FUSED.fingerprint(), payloadSum);
            assertEquals(RawTensorFormat.OK, RawTensorFormat.validate(object, object.byteSize(), spec,
                    FUSED.fingerprint()), "the fused sum differs from a pass over the payload");

            BlockTable other = new BlockTable(shuffled(12, r), 16, tokens);
            assertEquals(RawTensorFormat.OK, RawTensorFormat.validateHeader(object, object.byteSize(), spec,
                    FUSED.fingerprint()));
            long tensorBytes = tokens * FUSED.bytesPerTokenPerTensor();
            sum.reset();
            dst.scatter(object, RawTensorFormat.HEADER_BYTES, 1, 0, other, 0, tokens, sum);
            dst.scatter(object, RawTensorFormat.HEADER_BYTES + tensorBytes, 1, 1, other, 0, tokens, sum);
            assertEquals(RawTensorFormat.OK, RawTensorFormat.verifyPayloadSum(object, sum.value()));
            long tb = FUSED.bytesPerTokenPerTensor();
            for (int t = 0; t < tokens; t++) {
                for (int k = 0; k < 2; k++) {
                    assertEquals(-1, MemorySegment.mismatch(src.tensor(1, k), table.slot(t) * tb,
                            table.slot(t) * tb + tb, dst.tensor(1, k), other.slot(t) * tb, other.slot(t) * tb + tb),
                            "token " + t + " tensor " + k);
                }
            }
        }
    }

    @Test
    void aFlippedPayloadByteMakesTheFusedScatterCheckReportCorrupt() {
        int tokens = 48;
        try (PagedKVCache src = PagedKVCache.allocate(FUSED, 4); PagedKVCache dst = PagedKVCache.allocate(FUSED, 4);
             Arena a = Arena.ofConfined()) {
            Segments.fill(src.tensor(1, 0), 3);
            Segments.fill(src.tensor(1, 1), 4);
            BlockTable table = new BlockTable(new int[] {2, 0, 3}, 16, tokens);
            TensorSpec spec = layerSpec(tokens);
            MemorySegment object = a.allocate(RawTensorFormat.encodedSize(spec));
            WordSum sum = new WordSum();
            RawTensorFormat.writeHeaderWithSum(object, spec, tokens, FUSED.fingerprint(),
                    gatherLayer(src, table, object, sum));
            long at = RawTensorFormat.HEADER_BYTES + 5000;
            object.set(ValueLayout.JAVA_BYTE, at, (byte) (object.get(ValueLayout.JAVA_BYTE, at) ^ 0x10));
            assertEquals(RawTensorFormat.OK, RawTensorFormat.validateHeader(object, object.byteSize(), spec,
                    FUSED.fingerprint()), "a payload byte must not break the header check");
            long tensorBytes = tokens * FUSED.bytesPerTokenPerTensor();
            sum.reset();
            dst.scatter(object, RawTensorFormat.HEADER_BYTES, 1, 0, table, 0, tokens, sum);
            dst.scatter(object, RawTensorFormat.HEADER_BYTES + tensorBytes, 1, 1, table, 0, tokens, sum);
            int status = RawTensorFormat.verifyPayloadSum(object, sum.value());
            assertEquals(RawTensorFormat.BAD_PAYLOAD_SUM, status);
            assertTrue(RawTensorFormat.isCorrupt(status));
        }
    }

    @Test
    void fusedGatherAndScatterAllocateNothing() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        int tokens = 32 * 16;
        try (PagedKVCache cache = PagedKVCache.allocate(FUSED, 64); Arena a = Arena.ofConfined()) {
            // 32 blocks out of order, so 32 runs per call.
            int[] blocks = new int[32];
            for (int i = 0; i < blocks.length; i++) {
                blocks[i] = (i * 37) % 64;
            }
            BlockTable table = new BlockTable(blocks, 16, tokens);
            MemorySegment flat = a.allocate(tokens * FUSED.bytesPerTokenPerTensor());
            WordSum sum = new WordSum();
            long best = Long.MAX_VALUE;
            int calls = 500;
            for (int round = 0; round < 30; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < calls; i++) {
                    sum.reset();
                    cache.gather(0, 0, table, 0, tokens, flat, 0, sum);
                    cache.scatter(flat, 0, 0, 1, table, 0, tokens, sum);
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            assertTrue(best < calls, calls + " fused gathers and scatters of 32 blocks allocated " + best + " bytes");
        }
    }
}
