package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.tensor.DType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.AlphaChars;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** Properties every chunked scheme must keep, whatever the tokens. */
class KeySchemePropertiesTest {
    private static final KVLayout QWEN = KVLayout.preset("qwen2.5-0.5b");

    @Provide
    Arbitrary<KeyScheme> chunkedSchemes() {
        return Arbitraries.of(new KvcV1KeyScheme(), new LmcacheV0KeyScheme("vllm", true),
                new LmcacheV0KeyScheme("huggingface", true));
    }

    @Provide
    Arbitrary<KeyScheme> allSchemes() {
        return Arbitraries.of(new KvcV1KeyScheme(), new LmcacheV0KeyScheme("vllm", true),
                new LmcacheV0KeyScheme("vllm", false), new VllmV0KeyScheme());
    }

    private static KeyContext context(int chunkTokens) {
        return new KeyContext("org/model", QWEN, 0, 1, chunkTokens);
    }

    @Property(tries = 300)
    void requestsSharingKFullChunksShareExactlyThoseChunkKeys(
            @ForAll("chunkedSchemes") KeyScheme scheme,
            @ForAll @IntRange(min = 1, max = 8) int chunkTokens,
            @ForAll @IntRange(min = 0, max = 5) int sharedChunks,
            @ForAll @Size(min = 1, max = 40) List<Integer> tailA,
            @ForAll @Size(min = 1, max = 40) List<Integer> tailB,
            @ForAll @Size(max = 40) List<Integer> prefixPool) {
        int[] shared = new int[sharedChunks * chunkTokens];
        for (int i = 0; i < shared.length; i++) {
            shared[i] = prefixPool.isEmpty() ? i : prefixPool.get(i % prefixPool.size()) + i;
        }
        int[] a = concat(shared, tailA);
        int[] b = concat(shared, tailB);
        if (b[shared.length] == a[shared.length]) {
            b[shared.length] = a[shared.length] + 1;
        }
        KeyContext ctx = context(chunkTokens);
        List<ChunkKeys> ca = scheme.plan(ctx, RequestTokens.of(a)).chunks();
        List<ChunkKeys> cb = scheme.plan(ctx, RequestTokens.of(b)).chunks();
        for (int i = 0; i < sharedChunks; i++) {
            assertEquals(List.of(ca.get(i).layerKeys()), List.of(cb.get(i).layerKeys()), "shared chunk " + i);
        }
        for (int i = sharedChunks; i < Math.min(ca.size(), cb.size()); i++) {
            assertNotEquals(ca.get(i).hashHex(), cb.get(i).hashHex(), "chunk " + i + " after the shared prefix");
            assertTrue(disjoint(keys(List.of(ca.get(i))), keys(List.of(cb.get(i)))), "chunk " + i);
        }
    }

    @Property(tries = 200)
    void engineHashRequestsSharingKChunksShareExactlyThoseKeys(
            @ForAll @Size(min = 1, max = 10) List<@AlphaChars @Size(min = 1, max = 6) String> common,
            @ForAll @IntRange(min = 0, max = 10) int cut) {
        int k = Math.min(cut, common.size() - 1);
        String[] a = common.toArray(String[]::new);
        String[] b = a.clone();
        b[k] = b[k] + "x";
        KeyScheme scheme = new KvcV1KeyScheme();
        List<ChunkKeys> ca = scheme.plan(context(4), RequestTokens.ofChunkHashes(a, 4, a.length * 4)).chunks();
        List<ChunkKeys> cb = scheme.plan(context(4), RequestTokens.ofChunkHashes(b, 4, b.length * 4)).chunks();
        for (int i = 0; i < a.length; i++) {
            assertEquals(i < k, ca.get(i).hashHex().equals(cb.get(i).hashHex()), "chunk " + i + " with first change at " + k);
        }
    }

    @Property(tries = 200)
    void differentModelRankLayoutOrNamespaceGiveDisjointKeys(
            @ForAll @Size(min = 1, max = 30) List<Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 8) int chunkTokens,
            @ForAll @IntRange(min = 0, max = 3) int variant) {
        int[] tokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
        KeyContext base = new KeyContext("org/model", QWEN, 0, 2, chunkTokens);
        RequestTokens request = RequestTokens.of(tokens);
        KeyContext otherCtx = switch (variant) {
            case 0 -> new KeyContext("org/model-2", QWEN, 0, 2, chunkTokens);
            case 1 -> base.withRank(1, 2);
            case 2 -> new KeyContext("org/model", QWEN.withDtype(DType.FP16), 0, 2, chunkTokens);
            default -> base;
        };
        RequestTokens otherRequest = variant == 3 ? request.inNamespace("transfer-1") : request;
        KeyScheme kvc = new KvcV1KeyScheme();
        assertTrue(disjoint(keys(kvc.plan(base, request).chunks()), keys(kvc.plan(otherCtx, otherRequest).chunks())));
        if (variant == 0 || variant == 1) {
            KeyScheme lm = new LmcacheV0KeyScheme();
            assertTrue(disjoint(keys(lm.plan(base, request).chunks()), keys(lm.plan(otherCtx, request).chunks())));
        }
    }

    @Property(tries = 300)
    void chunksCoverEveryTokenExactlyOnceInOrder(
            @ForAll("allSchemes") KeyScheme scheme,
            @ForAll @Size(min = 1, max = 100) List<Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 16) int chunkTokens) {
        int[] tokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
        KeyPlan plan = scheme.plan(context(chunkTokens), RequestTokens.of(tokens));
        boolean dropsPartial = scheme instanceof LmcacheV0KeyScheme lm && !lm.saveUnfullChunk();
        int expectedEnd = dropsPartial ? tokens.length - tokens.length % chunkTokens : tokens.length;
        assertEquals(expectedEnd, plan.totalTokens());
        int next = 0;
        for (int i = 0; i < plan.chunks().size(); i++) {
            ChunkKeys c = plan.chunks().get(i);
            assertEquals(i, c.index());
            assertEquals(next, c.startToken());
            assertTrue(c.tokens() >= 1);
            if (scheme.granularity() != Granularity.WHOLE_REQUEST) {
                assertTrue(c.tokens() <= chunkTokens);
                assertTrue(c.tokens() == chunkTokens || i == plan.chunks().size() - 1, "only the last chunk is partial");
            }
            next = c.endToken();
        }
        assertEquals(expectedEnd, next);
        List<String> keys = keys(plan.chunks());
        assertEquals(keys.size(), new HashSet<>(keys).size(), "no key repeats within a plan");
    }

    @Property(tries = 100)
    void engineHashChunksCoverEveryTokenExactlyOnce(
            @ForAll @IntRange(min = 1, max = 64) int totalTokens,
            @ForAll @IntRange(min = 1, max = 16) int engineChunk) {
        int n = (totalTokens + engineChunk - 1) / engineChunk;
        String[] hashes = new String[n];
        Arrays.setAll(hashes, i -> "h" + i);
        RequestTokens request = RequestTokens.ofChunkHashes(hashes, engineChunk, totalTokens);
        for (KeyScheme scheme : List.of(new KvcV1KeyScheme(), new LmcacheV0KeyScheme())) {
            KeyPlan plan = scheme.plan(context(256), request);
            assertEquals(n, plan.chunks().size());
            int next = 0;
            for (ChunkKeys c : plan.chunks()) {
                assertEquals(next, c.startToken());
                next = c.endToken();
            }
            assertEquals(totalTokens, next);
        }
    }

    private static int[] concat(int[] head, List<Integer> tail) {
        int[] out = Arrays.copyOf(head, head.length + tail.size());
        for (int i = 0; i < tail.size(); i++) {
            out[head.length + i] = tail.get(i);
        }
        return out;
    }

    private static List<String> keys(List<ChunkKeys> chunks) {
        return chunks.stream().flatMap(c -> {
            List<String> all = new ArrayList<>(List.of(c.layerKeys()));
            if (c.hiddenKey() != null) {
                all.add(c.hiddenKey());
            }
            if (c.manifestKey() != null) {
                all.add(c.manifestKey());
            }
            return all.stream();
        }).toList();
    }

    private static boolean disjoint(List<String> a, List<String> b) {
        Set<String> s = new HashSet<>(a);
        return b.stream().noneMatch(s::contains);
    }
}
