package dev.kvconnector.lmcache.key;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeyScheme;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Chunk-hash vectors come from lmcache.md; the extra ones were computed with python3:
 * {@code python3 -c "import hashlib,struct; p=''; [print(p:=hashlib.sha256(p.encode('ascii')+struct.pack('<%dq'%len(c),*c)).hexdigest())
 * for c in [[0,1,2,3],[4,5,6,7],[8,9]]]"}.
 */
class LmcacheV0KeySchemeTest {
    private static final String H0 = "a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77";
    private static final String H1 = "b7ba39079729733940d601469f53c311e28249df7c29f60ac422ae74a40705cb";
    private static final String H2_PARTIAL = "b95f48dcb50889c67baafb4cba383d5abf9ddf2d487e323a48f0092a6f937998";

    private static final KeyContext TEST_MODEL =
            new KeyContext("test/model", KVLayout.preset("qwen2.5-0.5b"), 0, 1, 4);

    private static List<String> hashes(KeyPlan plan) {
        return plan.chunks().stream().map(ChunkKeys::hashHex).toList();
    }

    @Test
    void chainedChunkHashesMatchLmcacheVectors() {
        KeyPlan plan = new LmcacheV0KeyScheme().plan(TEST_MODEL, RequestTokens.of(0, 1, 2, 3, 4, 5, 6, 7));
        assertEquals(List.of(H0, H1), hashes(plan));
    }

    @Test
    void fullKeyMatchesLmcacheVector() {
        ChunkKeys first = new LmcacheV0KeyScheme().plan(TEST_MODEL, RequestTokens.of(0, 1, 2, 3)).chunks().getFirst();
        assertArrayEquals(new String[] {"vllm@test/model@1@0@" + H0}, first.layerKeys());
        assertNull(first.hiddenKey());
        assertNull(first.manifestKey());
    }

    @Test
    void keyCarriesFmtWorldSizeAndWorkerId() {
        KeyScheme hf = new LmcacheV0KeyScheme("huggingface", true);
        ChunkKeys first = hf.plan(TEST_MODEL.withRank(2, 4), RequestTokens.of(0, 1, 2, 3)).chunks().getFirst();
        assertEquals("huggingface@test/model@4@2@" + H0, first.layerKeys()[0]);
    }

    @Test
    void trailingPartialChunkIsKeptWhenSavingUnfullChunks() {
        KeyPlan plan = new LmcacheV0KeyScheme("vllm", true).plan(TEST_MODEL, RequestTokens.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
        assertEquals(List.of(H0, H1, H2_PARTIAL), hashes(plan));
        ChunkKeys last = plan.chunks().getLast();
        assertEquals(8, last.startToken());
        assertEquals(10, last.endToken());
        assertEquals(10, plan.totalTokens());
        assertEquals(Granularity.CHUNK, plan.granularity());
        assertEquals("lmcache-v0", plan.scheme());
    }

    @Test
    void trailingPartialChunkIsDroppedWhenNotSavingUnfullChunks() {
        KeyPlan plan = new LmcacheV0KeyScheme("vllm", false).plan(TEST_MODEL, RequestTokens.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
        assertEquals(List.of(H0, H1), hashes(plan));
        assertEquals(8, plan.totalTokens());
    }

    @Test
    void requestShorterThanOneChunkHasAnEmptyPlanWhenNotSavingUnfullChunks() {
        KeyPlan plan = new LmcacheV0KeyScheme("vllm", false).plan(TEST_MODEL, RequestTokens.of(0, 1, 2));
        assertTrue(plan.chunks().isEmpty());
        assertEquals(0, plan.totalTokens());
    }

    /** python3: chunk [128000,-1,2**31-1,7] with the one-liner above; -1 must be sign-extended to int64. */
    @Test
    void tokensAreHashedAsSignExtendedInt64() {
        KeyPlan plan = new LmcacheV0KeyScheme().plan(TEST_MODEL, RequestTokens.of(128000, -1, Integer.MAX_VALUE, 7));
        assertEquals(List.of("21636a22140aea1fe601d8048267c967c5a361c17f300646d4028f558a0859ac"), hashes(plan));
    }

    @Test
    void engineChunkHashesAreUsedAsTheChunkHashWithTheEnginesChunkSize() {
        RequestTokens request = RequestTokens.ofChunkHashes(new String[] {"aa", "bb", "cc"}, 16, 40);
        KeyPlan plan = new LmcacheV0KeyScheme().plan(TEST_MODEL, request);
        assertEquals(List.of("aa", "bb", "cc"), hashes(plan));
        assertEquals("vllm@test/model@1@0@cc", plan.chunks().get(2).layerKeys()[0]);
        assertEquals(32, plan.chunks().get(2).startToken());
        assertEquals(40, plan.chunks().get(2).endToken());
    }

    @Test
    void partialEngineChunkIsDroppedWhenNotSavingUnfullChunks() {
        RequestTokens request = RequestTokens.ofChunkHashes(new String[] {"aa", "bb", "cc"}, 16, 40);
        assertEquals(List.of("aa", "bb"), hashes(new LmcacheV0KeyScheme("vllm", false).plan(TEST_MODEL, request)));
        RequestTokens full = RequestTokens.ofChunkHashes(new String[] {"aa", "bb"}, 16, 32);
        assertEquals(List.of("aa", "bb"), hashes(new LmcacheV0KeyScheme("vllm", false).plan(TEST_MODEL, full)));
    }

    @Test
    void modelIdWithAtSignIsRefused() {
        KeyContext at = new KeyContext("org@model", KVLayout.preset("qwen2.5-0.5b"), 0, 1, 4);
        KVException e = assertThrows(KVException.class, () -> new LmcacheV0KeyScheme().plan(at, RequestTokens.of(1)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("org@model"), e.getMessage());
        assertTrue(e.hint().contains("5"), e.hint());
    }

    @Test
    void engineHashWithAtSignOrEmptyIsRefused() {
        KeyScheme scheme = new LmcacheV0KeyScheme();
        RequestTokens at = RequestTokens.ofChunkHashes(new String[] {"a@b"}, 16, 16);
        RequestTokens empty = RequestTokens.ofChunkHashes(new String[] {"ok", ""}, 16, 17);
        RequestTokens nul = RequestTokens.ofChunkHashes(new String[] {null}, 16, 16);
        for (RequestTokens r : List.of(at, empty, nul)) {
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> scheme.plan(TEST_MODEL, r)).code());
        }
    }

    @Test
    void unknownFmtIsRefused() {
        KVException e = assertThrows(KVException.class, () -> new LmcacheV0KeyScheme("torch", true));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("torch"), e.getMessage());
        assertThrows(KVException.class, () -> new LmcacheV0KeyScheme(null, true));
    }

    @Test
    void serviceLoaderInstanceUsesLmcacheDefaults() {
        LmcacheV0KeyScheme s = (LmcacheV0KeyScheme) KeySchemes.byName("lmcache-v0");
        assertEquals("vllm", s.fmt());
        assertTrue(s.saveUnfullChunk());
    }

    @Test
    void namespaceIsRefused() {
        KVException e = assertThrows(KVException.class,
                () -> new LmcacheV0KeyScheme().plan(TEST_MODEL, RequestTokens.of(1).inNamespace("t")));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }
}
