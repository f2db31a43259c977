package dev.kvconnector.key.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** What vllm-v1 plans keep for any tokens, under every hash algorithm. */
class VllmV1KeySchemePropertiesTest {
    private static final KVLayout LLAMA = KVLayout.preset("llama3-8b");

    @Provide
    Arbitrary<VllmV1KeyScheme> schemes() {
        return Arbitraries.of(VllmHashAlgorithm.values())
                .map(a -> new VllmV1KeyScheme(VllmV1Options.DEFAULTS.withHash(a, "0").withTotalKvHeads(8)));
    }

    private static List<String> keys(KeyPlan plan) {
        return plan.chunks().stream().map(c -> c.layerKeys()[0]).toList();
    }

    @Property(tries = 200)
    void fullBlocksOnlyInOrderWithoutRepeats(
            @ForAll("schemes") VllmV1KeyScheme scheme,
            @ForAll @Size(min = 1, max = 120) List<@IntRange(min = 0, max = 200_000) Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 16) int blockTokens) {
        int[] tokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
        KeyPlan plan = scheme.plan(new KeyContext("org/m", LLAMA, 0, 1, blockTokens), RequestTokens.of(tokens));
        assertEquals(tokens.length / blockTokens, plan.chunks().size());
        for (int i = 0; i < plan.chunks().size(); i++) {
            ChunkKeys c = plan.chunks().get(i);
            assertEquals(i * blockTokens, c.startToken());
            assertEquals(blockTokens, c.tokens());
            assertTrue(c.layerKeys()[0].endsWith("@" + c.hashHex()), c.layerKeys()[0]);
            assertEquals(2 * scheme.options().hash().digestBytes(), c.hashHex().length());
        }
        assertEquals(plan.chunks().size(), new HashSet<>(keys(plan)).size());
    }

    @Property(tries = 200)
    void requestsSharingKWholeBlocksShareExactlyThoseKeys(
            @ForAll("schemes") VllmV1KeyScheme scheme,
            @ForAll @IntRange(min = 1, max = 8) int blockTokens,
            @ForAll @IntRange(min = 0, max = 5) int sharedBlocks,
            @ForAll @Size(min = 1, max = 40) List<@IntRange(min = 0, max = 70_000) Integer> tailA,
            @ForAll @Size(min = 1, max = 40) List<@IntRange(min = 0, max = 70_000) Integer> tailB) {
        int[] shared = new int[sharedBlocks * blockTokens];
        Arrays.setAll(shared, i -> i * 257);
        int[] a = concat(shared, tailA);
        int[] b = concat(shared, tailB);
        if (a[shared.length] == b[shared.length]) {
            b[shared.length] = a[shared.length] + 1;
        }
        KeyContext ctx = new KeyContext("org/m", LLAMA, 0, 1, blockTokens);
        List<String> ka = keys(scheme.plan(ctx, RequestTokens.of(a)));
        List<String> kb = keys(scheme.plan(ctx, RequestTokens.of(b)));
        assertEquals(ka.subList(0, sharedBlocks), kb.subList(0, sharedBlocks));
        for (int i = sharedBlocks; i < Math.min(ka.size(), kb.size()); i++) {
            assertNotEquals(ka.get(i), kb.get(i), "block " + i + " after the shared prefix");
        }
    }

    private static int[] concat(int[] head, List<Integer> tail) {
        int[] out = Arrays.copyOf(head, head.length + tail.size());
        for (int i = 0; i < tail.size(); i++) {
            out[head.length + i] = tail.get(i);
        }
        return out;
    }
}
