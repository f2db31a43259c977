package dev.kvconnector.lmcache.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** lmcache-v1 keys chunk and hash as lmcache-v0 keys do ({@link LmcacheV0KeySchemeTest} holds the vectors). */
class LmcacheV1KeySchemeTest {
    private static final String H0 = "a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77";
    private static final KeyContext TEST_MODEL =
            new KeyContext("test/model", KVLayout.preset("qwen2.5-0.5b"), 0, 1, 4);

    @Test
    void keysHoldTheLmcacheV0ChunkHashThenTheDtypeThenTheTags() {
        KeyPlan plan = new LmcacheV1KeyScheme(true, Map.of("lora", "abc")).plan(TEST_MODEL.withRank(1, 2),
                RequestTokens.of(0, 1, 2, 3, 4, 5));
        assertEquals("lmcache-v1", plan.scheme());
        assertEquals("test/model@2@1@" + H0 + "@bfloat16@lora%abc", plan.chunks().getFirst().layerKeys()[0]);
        KeyPlan v0 = new LmcacheV0KeyScheme().plan(TEST_MODEL.withRank(1, 2), RequestTokens.of(0, 1, 2, 3, 4, 5));
        assertEquals(v0.chunks().stream().map(ChunkKeys::hashHex).toList(),
                plan.chunks().stream().map(ChunkKeys::hashHex).toList());
    }

    @Test
    void trailingPartialChunkIsDroppedWhenNotSavingUnfullChunks() {
        LmcacheV1KeyScheme scheme = new LmcacheV1KeyScheme(false, Map.of());
        assertFalse(scheme.saveUnfullChunk());
        assertEquals(4, scheme.plan(TEST_MODEL, RequestTokens.of(0, 1, 2, 3, 4, 5)).totalTokens());
    }

    @Test
    void aNamespaceIsRefusedNamingThisScheme() {
        KVException e = assertThrows(KVException.class,
                () -> new LmcacheV1KeyScheme().plan(TEST_MODEL, RequestTokens.of(1).inNamespace("t")));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("lmcache-v1") && !e.getMessage().contains("lmcache-v0"), e.getMessage());
    }

    @Test
    void engineHashesThatAreNotLowerCaseHexAreRefused() {
        assertEquals(List.of("ab"), new LmcacheV1KeyScheme().plan(TEST_MODEL,
                RequestTokens.ofChunkHashes(new String[] {"ab"}, 16, 16)).chunks().stream().map(ChunkKeys::hashHex)
                .toList());
        for (String hash : List.of("AB", "a@b", "")) {
            RequestTokens r = RequestTokens.ofChunkHashes(new String[] {hash}, 16, 16);
            KVException e = assertThrows(KVException.class, () -> new LmcacheV1KeyScheme().plan(TEST_MODEL, r));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), hash);
        }
    }

    /** The refusal lives in one place: both schemes and {@link LmcacheV1Keys} say it in the same words. */
    @Test
    void aModelIdWithAtIsRefusedAlikeByBothFormatsEvenForAnEmptyPlan() {
        KeyContext at = new KeyContext("org@model", KVLayout.preset("qwen2.5-0.5b"), 0, 1, 4);
        String v1 = assertThrows(KVException.class,
                () -> new LmcacheV1KeyScheme(false, Map.of()).plan(at, RequestTokens.of(1))).getMessage();
        String v0 = assertThrows(KVException.class,
                () -> new LmcacheV0KeyScheme("vllm", false).plan(at, RequestTokens.of(1))).getMessage();
        String keys = assertThrows(KVException.class,
                () -> LmcacheV1Keys.chunkKey("org@model", 1, 0, "ab", at.layout().dtype(), null)).getMessage();
        assertTrue(v1.contains("org@model"), v1);
        assertEquals(v1, v0);
        assertEquals(v1, keys);
    }

    @Test
    void byNameFindsBothLmcacheSchemesThroughServiceLoader() {
        assertInstanceOf(LmcacheV0KeyScheme.class, KeySchemes.byName("lmcache-v0"));
        assertTrue(assertInstanceOf(LmcacheV1KeyScheme.class, KeySchemes.byName("lmcache-v1")).saveUnfullChunk());
    }
}
