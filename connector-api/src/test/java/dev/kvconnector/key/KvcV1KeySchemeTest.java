package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The vectors are the ones in docs/key-schemes.md, produced by the Python reference implementation there. */
class KvcV1KeySchemeTest {
    private static final KeyScheme SCHEME = new KvcV1KeyScheme();
    private static final KVLayout QWEN = KVLayout.preset("qwen2.5-0.5b");
    private static final KeyContext QWEN_4 = new KeyContext("Qwen/Qwen2.5-0.5B", QWEN, 0, 1, 4);
    private static final String H0 = "f603f4f221e8cb2afecc7c1b96f11519229f872fd55d45f2989869bfe2b06737";
    private static final String H1 = "de35082d1031625ad098f3db1b2f948628d798aada5f2d8e97ab4905efff36b0";
    private static final String E0 = "011c6269bd7fcd7909f1ed08351cfef0a6e5b2520a5cb93ae5ff3e10b28efc02";
    private static final String E1 = "07ecff2d85e13f33e21ece2194c6bd54ad4e15694ee80b8d8da931b0dcbf73e8";

    @Test
    void layoutFingerprintMatchesTheDocumentedPythonFingerprint() {
        assertEquals("632dc0c29ac05d59", QWEN.fingerprintHex());
    }

    @Test
    void tokenModeMatchesDocumentedVector() {
        KeyPlan plan = SCHEME.plan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6));
        assertEquals(2, plan.chunks().size());
        ChunkKeys first = plan.chunks().get(0);
        ChunkKeys second = plan.chunks().get(1);
        assertEquals(H0, first.hashHex());
        assertEquals("kvc1:{" + H0 + "}:L0", first.layerKeys()[0]);
        assertEquals("kvc1:{" + H0 + "}:L23", first.layerKeys()[23]);
        assertEquals("kvc1:{" + H0 + "}:H", first.hiddenKey());
        assertEquals("kvc1:{" + H0 + "}:M", first.manifestKey());
        assertEquals(H1, second.hashHex());
        assertEquals(4, second.startToken());
        assertEquals(6, second.endToken());
    }

    @Test
    void engineHashModeMatchesDocumentedVector() {
        KeyContext rank1 = QWEN_4.withRank(1, 2);
        RequestTokens request = RequestTokens.ofChunkHashes(new String[] {"blk-a", "blk-b"}, 16, 20)
                .inNamespace("transfer-42");
        KeyPlan plan = SCHEME.plan(rank1, request);
        assertEquals(E0, plan.chunks().get(0).hashHex());
        assertEquals(E1, plan.chunks().get(1).hashHex());
        assertEquals(16, plan.chunks().get(1).startToken());
        assertEquals(20, plan.chunks().get(1).endToken());
    }

    @Test
    void aReplannedPlanNamesWhatAFreshPlanOfTheNewRequestNames() {
        KeyPlan plan = SCHEME.plan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6));
        ChunkKeys first = plan.chunks().get(0);
        RequestTokens next = RequestTokens.of(9, 8, 7, 6, 5, 4).inNamespace("tenant-b");
        assertTrue(SCHEME.replan(QWEN_4, next, plan));
        KeyPlan fresh = SCHEME.plan(QWEN_4, next);
        assertSame(first, plan.chunks().get(0), "the plan is rewritten in place");
        for (int c = 0; c < 2; c++) {
            ChunkKeys was = plan.chunks().get(c);
            ChunkKeys want = fresh.chunks().get(c);
            assertEquals(want.hashHex(), was.hashHex());
            assertArrayEquals(want.layerKeys(), was.layerKeys());
            assertEquals(want.hiddenKey(), was.hiddenKey());
            assertEquals(want.manifestKey(), was.manifestKey());
            assertEquals(want.startToken(), was.startToken());
            assertEquals(want.endToken(), was.endToken());
        }
        assertTrue(SCHEME.replan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6), plan));
        assertEquals(H0, plan.chunks().get(0).hashHex(), "back to the documented vector");
        assertEquals(H1, plan.chunks().get(1).hashHex());
    }

    @Test
    void aPlanOfAnotherShapeIsNotReplannedAndStaysAsItWas() {
        KeyPlan plan = SCHEME.plan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6));
        assertFalse(SCHEME.replan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5), plan), "fewer tokens");
        assertFalse(SCHEME.replan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6, 7, 8, 9), plan), "another chunk");
        assertFalse(SCHEME.replan(new KeyContext("Qwen/Qwen2.5-0.5B", QWEN, 0, 1, 3), RequestTokens.of(1, 2, 3, 4, 5,
                6), plan), "other chunk boundaries");
        assertFalse(SCHEME.replan(QWEN_4, RequestTokens.ofChunkHashes(new String[] {"a", "b"}, 4, 6), plan),
                "engine hashes");
        KeyPlan named = new KeyPlan(KvcV1KeyScheme.NAME, Granularity.CHUNK_LAYER, List.of(new ChunkKeys(0, 0, 6, "ab",
                new String[] {"k"}, null, null)));
        assertFalse(SCHEME.replan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6), named), "a plan of named keys");
        assertEquals(H0, plan.chunks().get(0).hashHex());
        assertEquals(H1, plan.chunks().get(1).hashHex());
        assertThrows(KVException.class, () -> SCHEME.replan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6)
                .inNamespace("a\u0000b"), plan));
        assertEquals(H0, plan.chunks().get(0).hashHex(), "a refused namespace leaves the plan as it was");
    }

    @Test
    void documentedVectorsAreTheOnesAssertedHere() throws IOException {
        String doc = Files.readString(Path.of("..", "docs", "key-schemes.md"));
        for (String hex : List.of(H0, H1, E0, E1, "632dc0c29ac05d59")) {
            assertTrue(doc.contains(hex), "docs/key-schemes.md lists " + hex);
        }
    }

    @Test
    void planHasOneKeyPerLayerPlusHiddenAndManifest() {
        KeyContext llama = KeyContext.of("meta-llama/Llama-3.1-70B", KVLayout.preset("llama3-70b"));
        KeyPlan plan = SCHEME.plan(llama, RequestTokens.of(new int[600]));
        assertEquals("kvc-v1", plan.scheme());
        assertEquals(Granularity.CHUNK_LAYER, plan.granularity());
        assertEquals(3, plan.chunks().size());
        for (ChunkKeys c : plan.chunks()) {
            assertEquals(80, c.layerKeys().length);
            assertTrue(c.hashHex().matches("[0-9a-f]{64}"), c.hashHex());
            for (int layer = 0; layer < 80; layer++) {
                assertEquals("kvc1:{" + c.hashHex() + "}:L" + layer, c.layerKeys()[layer]);
            }
        }
    }

    @Test
    void everyObjectOfOneChunkHashesToOneClusterSlot() {
        assertEquals(0x31C3, ClusterSlot.crc16("123456789".getBytes(StandardCharsets.US_ASCII)));
        KeyPlan plan = SCHEME.plan(QWEN_4, RequestTokens.of(1, 2, 3, 4, 5, 6, 7, 8, 9));
        Set<Integer> slotsOfChunks = new HashSet<>();
        for (ChunkKeys c : plan.chunks()) {
            List<String> keys = new ArrayList<>(List.of(c.layerKeys()));
            keys.add(c.hiddenKey());
            keys.add(c.manifestKey());
            int slot = ClusterSlot.of(keys.getFirst());
            for (String k : keys) {
                assertEquals(slot, ClusterSlot.of(k), k);
                assertEquals(c.hashHex(), ClusterSlot.hashTag(k), k);
            }
            slotsOfChunks.add(slot);
        }
        assertEquals(ClusterSlot.of(plan.chunks().getFirst().hashHex()),
                ClusterSlot.of(plan.chunks().getFirst().manifestKey()), "the slot is the tag's slot");
        assertTrue(slotsOfChunks.size() > 1, "chunks spread over slots");
    }

    @Test
    void nullAndEmptyNamespaceAreTheSameNamespace() {
        assertEquals(SCHEME.plan(QWEN_4, RequestTokens.of(1, 2)).chunks().getFirst().hashHex(),
                SCHEME.plan(QWEN_4, RequestTokens.of(1, 2).inNamespace("")).chunks().getFirst().hashHex());
    }

    @Test
    void tokenModeAndEngineHashModeNeverShareKeys() {
        String viaTokens = SCHEME.plan(QWEN_4, RequestTokens.of(1, 2, 3, 4)).chunks().getFirst().hashHex();
        String viaEngine = SCHEME.plan(QWEN_4, RequestTokens.ofChunkHashes(new String[] {viaTokens}, 4, 4))
                .chunks().getFirst().hashHex();
        assertNotEquals(viaTokens, viaEngine);
    }

    @Test
    void nulInModelOrNamespaceIsRefused() {
        KeyContext nulModel = new KeyContext("a\0b", QWEN, 0, 1, 4);
        KVException e = assertThrows(KVException.class, () -> SCHEME.plan(nulModel, RequestTokens.of(1)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("model id"), e.getMessage());
        KVException ns = assertThrows(KVException.class,
                () -> SCHEME.plan(QWEN_4, RequestTokens.of(1).inNamespace("x\0")));
        assertTrue(ns.getMessage().contains("namespace"), ns.getMessage());
    }

    @Test
    void nullEngineHashIsRefusedNamingItsIndex() {
        RequestTokens request = RequestTokens.ofChunkHashes(new String[] {"a", null}, 4, 6);
        KVException e = assertThrows(KVException.class, () -> SCHEME.plan(QWEN_4, request));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("hash 1 of 2"), e.getMessage());
    }

    @Test
    void chunkOfOneTokenAndChunkLargerThanRequestBothWork() {
        assertEquals(3, SCHEME.plan(QWEN_4.withChunkTokens(1), RequestTokens.of(1, 2, 3)).chunks().size());
        KeyPlan one = SCHEME.plan(QWEN_4.withChunkTokens(Integer.MAX_VALUE), RequestTokens.of(1, 2, 3));
        assertEquals(1, one.chunks().size());
        assertEquals(3, one.totalTokens());
    }
}
