package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.KeySchemeContract;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.AlphaChars;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** {@link KeySchemeContract} over connector-api's schemes, and what only kvc-v1 keys promise. */
class KeySchemePropertiesTest extends KeySchemeContract {
    @Override
    protected List<KeyScheme> schemes() {
        return List.of(new KvcV1KeyScheme(), new VllmV0KeyScheme());
    }

    @Override
    protected List<KeyScheme> chainedSchemes() {
        return List.of(new KvcV1KeyScheme());
    }

    @Override
    protected List<KeyScheme> engineHashSchemes() {
        return List.of(new KvcV1KeyScheme());
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
    void kvcV1KeysOfAnotherDtypeOrNamespaceAreDisjoint(
            @ForAll @Size(min = 1, max = 30) List<Integer> tokenList,
            @ForAll @IntRange(min = 1, max = 8) int chunkTokens,
            @ForAll boolean otherNamespace) {
        int[] tokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
        KeyContext base = new KeyContext("org/model", QWEN, 0, 2, chunkTokens);
        RequestTokens request = RequestTokens.of(tokens);
        KeyContext otherCtx = otherNamespace ? base : new KeyContext("org/model", QWEN.withDtype(DType.FP16), 0, 2,
                chunkTokens);
        RequestTokens otherRequest = otherNamespace ? request.inNamespace("transfer-1") : request;
        KeyScheme kvc = new KvcV1KeyScheme();
        assertTrue(disjoint(keys(kvc.plan(base, request).chunks()), keys(kvc.plan(otherCtx, otherRequest).chunks())));
    }
}
