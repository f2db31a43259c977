package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The engine on its paged cache against the cache-free array reference, and gather/scatter of real KV. */
class PagedDecodeTest {
    private static final ModelWeights TINY = ModelWeights.random(ModelConfig.tiny(7));

    @Test
    void pagedDecodeEqualsArrayReferenceTokenForToken() {
        int[] prompt = ByteTokenizer.encode("The paged cache must not change a single token.");
        int[] expected = new ArrayReferenceModel(TINY).generate(prompt, 24);
        try (Engine engine = Engine.builder(TINY).build()) {
            Generation g = engine.generate(prompt, 24);
            assertArrayEquals(expected, g.tokens());
            assertTrue(Arrays.stream(expected).distinct().count() > 3, "a degenerate model would prove nothing: "
                    + Arrays.toString(expected));
            assertEquals(Generation.PrefillSource.COMPUTED, g.prefill());
            assertEquals(1, engine.metrics().prefillPasses());
            assertEquals(23, engine.metrics().decodeSteps());
            assertEquals(engine.config().maxContext() / 16 * 4, engine.freeBlocks(), "every block is freed");
        }
    }

    @Test
    void defaultEightLayerModelDecodeEqualsArrayReference() {
        ModelWeights small = ModelWeights.random(ModelConfig.small(3));
        int[] prompt = ByteTokenizer.encode("Llama?");
        int[] expected = new ArrayReferenceModel(small).generate(prompt, 3);
        try (Engine engine = Engine.builder(small).cacheBlocks(4).build()) {
            assertArrayEquals(expected, engine.generate(prompt, 3).tokens());
        }
    }

    @Test
    void decodeThroughScatteredBlocksEqualsArrayReference() {
        int[] prompt = ByteTokenizer.encode("Blocks need not be contiguous, nor in order: 0123456789");
        int maxTokens = 10;
        int[] expected = new ArrayReferenceModel(TINY).generate(prompt, maxTokens);
        Transformer model = new Transformer(TINY);
        try (PagedKVCache cache = PagedKVCache.allocate(TINY.config().kvLayout(), 12)) {
            BlockTable table = new BlockTable(new int[] {9, 2, 11, 0, 5}, 16, 80);
            float[] hidden = model.forward(prompt, 0, cache, table, null);
            int next = Kernels.argmax(model.logits(hidden, prompt.length - 1));
            int[] got = new int[maxTokens];
            got[0] = next;
            for (int i = 1; i < maxTokens; i++) {
                hidden = model.forward(new int[] {next}, prompt.length + i - 1, cache, table, null);
                next = Kernels.argmax(model.logits(hidden, 0));
                got[i] = next;
            }
            assertArrayEquals(expected, got);
        }
    }

    @Test
    void gatherAndScatterOfRealKvAreExact() {
        ModelConfig c = TINY.config();
        int[] prompt = ByteTokenizer.encode("Gathered, scattered, and gathered again: still the same bits.");
        int n = prompt.length;
        ArrayReferenceModel ref = new ArrayReferenceModel(TINY);
        ref.forward(prompt);
        try (PagedKVCache a = PagedKVCache.allocate(c.kvLayout(), 16);
             PagedKVCache b = PagedKVCache.allocate(c.kvLayout(), 16)) {
            BlockTable ta = new BlockTable(new int[] {3, 15, 1, 8}, 16, 64);
            BlockTable tb = new BlockTable(new int[] {0, 1, 2, 3}, 16, 64);
            new Transformer(TINY).forward(prompt, 0, a, ta, null);
            long bytes = n * c.kvLayout().bytesPerTokenPerTensor();
            float[] flat = new float[n * c.kvHeads() * c.headSize()];
            MemorySegment flatSeg = MemorySegment.ofArray(flat);
            float[] again = new float[flat.length];
            for (int l = 0; l < c.layers(); l++) {
                for (int t = 0; t < 2; t++) {
                    a.gather(l, t, ta, 0, n, flatSeg, 0);
                    assertArrayEquals(t == 0 ? ref.lastKeys[l] : ref.lastValues[l], flat,
                            "layer " + l + " tensor " + t + " gathered from the paged cache");
                    b.scatter(flatSeg, 0, l, t, tb, 0, n);
                    b.gather(l, t, tb, 0, n, MemorySegment.ofArray(again), 0);
                    assertArrayEquals(flat, again);
                    assertEquals(-1, MemorySegment.mismatch(b.tensor(l, t), 0, bytes, flatSeg, 0, bytes),
                            "a block-aligned table 0..3 stores the tokens contiguously");
                }
            }
            assertNotEquals(0f, a.tensor(0, 0).get(ValueLayout.JAVA_FLOAT, 3L * 16 * c.kvHeads() * c.headSize() * 4));
        }
    }

    @Test
    void requestsLongerThanTheContextAreRefused() {
        try (Engine engine = Engine.builder(TINY).build()) {
            int[] prompt = new int[TINY.config().maxContext()];
            KVException e = assertThrows(KVException.class, () -> engine.generate(prompt, 1));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertThrows(KVException.class, () -> engine.generate(new int[0], 1));
            assertThrows(KVException.class, () -> engine.generate(new int[] {256}, 1));
            assertThrows(KVException.class, () -> engine.generate(new int[] {1}, 0));
        }
    }

    @Test
    void aFullCacheIsBusyAndFreesNothingItDidNotTake() {
        try (Engine engine = Engine.builder(TINY).cacheBlocks(2).build()) {
            KVException e = assertThrows(KVException.class, () -> engine.generate(new int[40], 1));
            assertEquals(ErrorCode.BUSY, e.code());
            assertEquals(2, engine.freeBlocks());
            assertEquals(2, engine.generate(new int[20], 2).tokens().length);
        }
    }

    @Test
    void sameSeedSameWeightsOtherSeedOtherTokens() {
        int[] prompt = ByteTokenizer.encode("seed");
        int[] a = new ArrayReferenceModel(ModelWeights.random(ModelConfig.tiny(7))).generate(prompt, 8);
        int[] b = new ArrayReferenceModel(TINY).generate(prompt, 8);
        int[] c = new ArrayReferenceModel(ModelWeights.random(ModelConfig.tiny(8))).generate(prompt, 8);
        assertArrayEquals(a, b);
        assertNotEquals(Arrays.toString(a), Arrays.toString(c));
    }
}
