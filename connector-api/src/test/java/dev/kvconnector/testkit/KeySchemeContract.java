package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
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
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The properties every {@link KeyScheme} keeps, whatever the tokens. A module proves its schemes by extending this
 * class and listing them; the module that holds a scheme runs its properties, so a scheme moved to another module
 * takes them along.
 */
public abstract class KeySchemeContract {
    /** The layout of every context: {@code qwen2.5-0.5b}, BF16. */
    protected static final KVLayout QWEN = KVLayout.preset("qwen2.5-0.5b");

    /** Every scheme under test; each plans a request from its prompt tokens. */
    protected abstract List<KeyScheme> schemes();

    /**
     * The schemes whose chunk keys chain over the tokens and bind the model and the rank: two requests share exactly
     * the keys of their leading full chunks in common.
     */
    protected abstract List<KeyScheme> chainedSchemes();

    /** The schemes that plan a request of engine chunk hashes ({@link RequestTokens#ofChunkHashes}). */
    protected abstract List<KeyScheme> engineHashSchemes();

    /** Whether {@code scheme} cuts a request to whole chunks, keying no trailing partial chunk. */
    protected boolean dropsPartialChunk(KeyScheme scheme) {
        return false;
    }

    @Provide
    Arbitrary<KeyScheme> everyScheme() {
        return Arbitraries.of(schemes());
    }

    @Provide
    Arbitrary<KeyScheme> chainedScheme() {
        return Arbitraries.of(chainedSchemes());
    }

    /** A context of {@link #QWEN} for {@code org/model}, rank 0 of 1, with chunks of {@code chunkTokens} tokens. */
    protected static KeyContext context(int chunkTokens) {
        return new KeyContext("org/model", QWEN, 0, 1, chunkTokens);
    }

    @Property(tries = 300)
    void requestsSharingKFullChunksShareExactlyThoseChunkKeys(
            @ForAll("chainedScheme") KeyScheme scheme,
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
    void differentModelOrRankGiveDisjointKeys(
            @ForAll("chainedScheme") KeyScheme scheme,
            @ForAll @Size(min = 1, max = 30) List<Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 8) int chunkTokens,
            @ForAll boolean otherModel) {
        RequestTokens request = RequestTokens.of(tokenList.stream().mapToInt(Integer::intValue).toArray());
        KeyContext base = new KeyContext("org/model", QWEN, 0, 2, chunkTokens);
        KeyContext other = otherModel ? new KeyContext("org/model-2", QWEN, 0, 2, chunkTokens) : base.withRank(1, 2);
        assertTrue(disjoint(keys(scheme.plan(base, request).chunks()), keys(scheme.plan(other, request).chunks())));
    }

    @Property(tries = 300)
    void chunksCoverEveryTokenExactlyOnceInOrder(
            @ForAll("everyScheme") KeyScheme scheme,
            @ForAll @Size(min = 1, max = 100) List<Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 16) int chunkTokens) {
        int[] tokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
        KeyPlan plan = scheme.plan(context(chunkTokens), RequestTokens.of(tokens));
        int expectedEnd = dropsPartialChunk(scheme) ? tokens.length - tokens.length % chunkTokens : tokens.length;
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
        Arrays.setAll(hashes, i -> "a" + i);
        RequestTokens request = RequestTokens.ofChunkHashes(hashes, engineChunk, totalTokens);
        for (KeyScheme scheme : engineHashSchemes()) {
            KeyPlan plan = scheme.plan(context(256), request);
            int keyed = dropsPartialChunk(scheme) ? totalTokens / engineChunk : n;
            assertEquals(keyed, plan.chunks().size(), scheme.name());
            int next = 0;
            for (ChunkKeys c : plan.chunks()) {
                assertEquals(next, c.startToken());
                next = c.endToken();
            }
            assertEquals(keyed == n ? totalTokens : keyed * engineChunk, next, scheme.name());
        }
    }

    /** Every key of {@code chunks}: layer keys, then the hidden-state and manifest keys where the scheme has them. */
    protected static List<String> keys(List<ChunkKeys> chunks) {
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

    /** Whether no key is in both lists. */
    protected static boolean disjoint(List<String> a, List<String> b) {
        Set<String> s = new HashSet<>(a);
        return b.stream().noneMatch(s::contains);
    }

    private static int[] concat(int[] head, List<Integer> tail) {
        int[] out = Arrays.copyOf(head, head.length + tail.size());
        for (int i = 0; i < tail.size(); i++) {
            out[head.length + i] = tail.get(i);
        }
        return out;
    }
}
