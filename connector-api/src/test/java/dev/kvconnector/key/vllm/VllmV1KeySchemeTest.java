package dev.kvconnector.key.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.Granularity;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KeyPlan;
import dev.kvconnector.key.KeySchemes;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class VllmV1KeySchemeTest {
    private static final String MODEL = "meta-llama/Llama-3.1-8B";
    private static final KVLayout LLAMA = KVLayout.preset("llama3-8b");
    private static final KVLayout MLA = KVLayout.preset("deepseek-v3-mla");

    private static KeyContext context(KVLayout layout, int tpRank, int tpSize, int blockTokens) {
        return new KeyContext(MODEL, layout, tpRank, tpSize, blockTokens);
    }

    private static List<String> keys(KeyPlan plan) {
        return plan.chunks().stream().map(c -> c.layerKeys()[0]).toList();
    }

    @Test
    void everyKeyOfEveryVectorMatchesForTpRanksZeroAndThree() {
        JsonNode params = VllmVectors.ROOT.get("params");
        int tpSize = params.get("tp_size").asInt();
        int checked = 0;
        for (String section : List.of("vectors", "extras")) {
            for (JsonNode v : VllmVectors.ROOT.get(section)) {
                if (!v.has("keys")) {
                    continue;
                }
                VllmV1Options options = VllmV1Options.DEFAULTS
                        .withHash(VllmHashAlgorithm.byName(v.get("algo").asText(), "hash"), VllmVectors.seed(v))
                        .withTotalKvHeads(params.get("num_kv_heads").asInt())
                        .withCachePrefix(v.has("cache_prefix") ? v.get("cache_prefix").asText() : "")
                        .withHashBlockTokens(v.has("hash_block_size") ? v.get("hash_block_size").asInt() : 0);
                VllmV1KeyScheme scheme = new VllmV1KeyScheme(options);
                VllmExtraKeys extra = new VllmExtraKeys(VllmVectors.textOrNull(v, "lora_name"),
                        VllmVectors.textOrNull(v, "cache_salt"));
                int[] tokens = VllmVectors.tokens(v.get("case").asInt());
                for (Map.Entry<String, JsonNode> ranks : v.get("keys").properties()) {
                    int rank = Integer.parseInt(ranks.getKey().substring("tp_rank_".length()));
                    KeyPlan plan = scheme.plan(context(LLAMA, rank, tpSize, v.get("block_size").asInt()), tokens, extra);
                    assertEquals(VllmVectors.strings(ranks.getValue()), keys(plan),
                            section + " " + v.get("label") + " " + v.get("algo") + " case " + v.get("case") + " block "
                                    + v.get("block_size") + " " + ranks.getKey());
                    checked++;
                }
            }
        }
        assertEquals(2 * (12 + 6), checked, "12 vectors and 6 extras carry keys for two ranks");
    }

    @Test
    void aRequestThatIsNotAMultipleOfTheBlockSizeGetsKeysForItsFullBlocksOnly() {
        int[] tokens = VllmVectors.tokens(1);
        KeyPlan plan = new VllmV1KeyScheme().plan(context(LLAMA, 0, 1, 16), RequestTokens.of(tokens));
        assertEquals(275, tokens.length);
        assertEquals(17, plan.chunks().size());
        assertEquals(272, plan.totalTokens());
        ChunkKeys last = plan.chunks().getLast();
        assertEquals(256, last.startToken());
        assertEquals(272, last.endToken());
        assertEquals(Granularity.CHUNK, plan.granularity());
        assertEquals(0, new VllmV1KeyScheme().plan(context(LLAMA, 0, 1, 16),
                RequestTokens.of(Arrays.copyOf(tokens, 15))).chunks().size(), "less than one block: no key");
    }

    @Test
    void twoRequestsSharingWholeBlocksShareExactlyThoseKeys() {
        int[] a = VllmVectors.tokens(2);
        int[] b = a.clone();
        b[3 * 16 + 5] += 1;
        VllmV1KeyScheme scheme = new VllmV1KeyScheme();
        List<String> ka = keys(scheme.plan(context(LLAMA, 0, 1, 16), RequestTokens.of(a)));
        List<String> kb = keys(scheme.plan(context(LLAMA, 0, 1, 16), RequestTokens.of(Arrays.copyOf(b, 200))));
        assertEquals(ka.subList(0, 3), kb.subList(0, 3));
        for (int i = 3; i < kb.size(); i++) {
            assertNotEquals(ka.get(i), kb.get(i), "block " + i);
            assertTrue(!ka.contains(kb.get(i)), "block " + i);
        }
    }

    @Test
    void mlaWritesTpRankZeroOnEveryRankAndALookupNeedsOneNamespace() {
        VllmV1KeyScheme scheme = new VllmV1KeyScheme();
        int[] tokens = IntStream.range(0, 64).toArray();
        List<String> rank0 = keys(scheme.plan(context(MLA, 0, 8, 16), RequestTokens.of(tokens)));
        for (int rank = 0; rank < 8; rank++) {
            assertEquals(8, scheme.replicationFactor(context(MLA, rank, 8, 16)));
            assertEquals(rank0, keys(scheme.plan(context(MLA, rank, 8, 16), RequestTokens.of(tokens))), "rank " + rank);
        }
        assertTrue(rank0.getFirst().startsWith("Llama-3.1-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@"), rank0.getFirst());
        assertEquals(List.of("Llama-3.1-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0"),
                scheme.lookupNamespaces(context(MLA, 5, 8, 16)).stream().map(VllmKeyNamespace::prefix).toList());
    }

    @Test
    void gqaWithMoreRanksThanKvHeadsSharesKeyRanksAndALookupNeedsEachDistinctOne() {
        VllmV1KeyScheme scheme = new VllmV1KeyScheme(VllmV1Options.DEFAULTS.withTotalKvHeads(2));
        int[] expectedKeyRank = {0, 0, 0, 0, 1, 1, 1, 1};
        for (int rank = 0; rank < 8; rank++) {
            assertEquals(expectedKeyRank[rank], scheme.writerNamespace(context(LLAMA, rank, 8, 16)).tpRank(), "rank " + rank);
        }
        assertEquals(List.of(0, 1), scheme.lookupNamespaces(context(LLAMA, 3, 8, 16)).stream()
                .map(VllmKeyNamespace::tpRank).toList());
        VllmV1KeyScheme llama = new VllmV1KeyScheme(VllmV1Options.DEFAULTS.withTotalKvHeads(8));
        assertEquals(3, llama.writerNamespace(context(LLAMA, 3, 4, 16)).tpRank(), "8 KV heads over TP 4: no sharing");
        assertEquals(4, llama.lookupNamespaces(context(LLAMA, 0, 4, 16)).size());
    }

    @Test
    void lookupKeysNameTheBlockInEveryNamespaceInVllmsOrder() {
        VllmV1KeyScheme scheme = new VllmV1KeyScheme(VllmV1Options.DEFAULTS.withTotalKvHeads(8).withPcp(1, 2).withPp(1, 2)
                .withCachePrefix("deployA"));
        List<String> keys = scheme.lookupKeys(context(LLAMA, 1, 2, 16), "ab");
        assertEquals(List.of(
                "deployA@Llama-3.1-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:0@pcp0@dcp0@pp_rank:1@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:1@pcp0@dcp0@pp_rank:1@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:0@pcp1@dcp0@pp_rank:0@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:0@pcp1@dcp0@pp_rank:1@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:1@pcp1@dcp0@pp_rank:0@group:0@ab",
                "deployA@Llama-3.1-8B@tp_rank:1@pcp1@dcp0@pp_rank:1@group:0@ab"), keys);
        assertEquals("deployA@Llama-3.1-8B@tp_rank:1@pcp1@dcp0@pp_rank:1@group:0",
                scheme.writerNamespace(context(LLAMA, 1, 2, 16)).prefix());
    }

    @Test
    void dcpGivesEachTpRankItsOwnNamespaceEvenForMla() {
        VllmV1KeyScheme scheme = new VllmV1KeyScheme(VllmV1Options.DEFAULTS.withDcpSize(2).withGroup(1));
        assertEquals(1, scheme.replicationFactor(context(MLA, 0, 4, 32)));
        VllmKeyNamespace rank3 = scheme.writerNamespace(context(MLA, 3, 4, 32));
        assertEquals("Llama-3.1-8B@tp_rank:3@pcp0@dcp1@pp_rank:0@group:1", rank3.prefix());
        assertEquals(List.of("0/0", "1/1", "2/0", "3/1"), scheme.lookupNamespaces(context(MLA, 0, 4, 32)).stream()
                .map(ns -> ns.tpRank() + "/" + ns.dcpRank()).toList());
        KVException e = assertThrows(KVException.class, () -> scheme.writerNamespace(context(MLA, 0, 3, 32)));
        assertTrue(e.getMessage().contains("dcp size 2"), e.getMessage());
    }

    @Test
    void engineBlockHashesAreUsedAsTheyAreAndGiveTheSameKeysAsTheTokens() {
        JsonNode v = VllmVectors.ROOT.get("vectors").get(1);
        String[] hashes = VllmVectors.strings(v.get("block_hashes")).toArray(String[]::new);
        int total = v.get("num_tokens").asInt();
        VllmV1KeyScheme scheme = new VllmV1KeyScheme();
        String[] withPartial = Arrays.copyOf(hashes, hashes.length + 1);
        withPartial[hashes.length] = "ff";
        KeyPlan fromHashes = scheme.plan(context(LLAMA, 0, 1, 16), RequestTokens.ofChunkHashes(withPartial, 16, total));
        KeyPlan fromTokens = scheme.plan(context(LLAMA, 0, 1, 16), RequestTokens.of(VllmVectors.tokens(1)));
        assertEquals(keys(fromTokens), keys(fromHashes));
        hashes[2] = "ABC";
        KVException e = assertThrows(KVException.class,
                () -> scheme.plan(context(LLAMA, 0, 1, 16), RequestTokens.ofChunkHashes(hashes, 16, 17 * 16)));
        assertTrue(e.getMessage().contains("engine block hash 2") && e.getMessage().contains("ABC"), e.getMessage());
    }

    @Test
    void theModelNameIsTheLastPathPartAndAModelIdEndingInSlashIsRefused() {
        assertEquals("Llama-3.1-8B", VllmKeyNamespace.modelName("meta-llama/Llama-3.1-8B"));
        assertEquals("Llama-3.1-8B", VllmKeyNamespace.modelName("/models/meta-llama/Llama-3.1-8B"));
        assertEquals("gpt2", VllmKeyNamespace.modelName("gpt2"));
        KVException e = assertThrows(KVException.class, () -> new VllmV1KeyScheme().plan(
                new KeyContext("meta-llama/Llama-3.1-8B/", LLAMA, 0, 1, 16), RequestTokens.of(1, 2)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("model id 'meta-llama/Llama-3.1-8B/' ends in '/'"), e.getMessage());
    }

    @Test
    void aNamespaceIsRefusedBecauseVllmKeysHaveNoPlaceForOne() {
        KVException e = assertThrows(KVException.class, () -> new VllmV1KeyScheme().plan(context(LLAMA, 0, 1, 16),
                RequestTokens.of(1, 2).inNamespace("transfer-1")));
        assertTrue(e.getMessage().contains("transfer-1"), e.getMessage());
    }

    @Test
    void oneKvHeadPerRankWithoutTheTotalIsRefusedAsAmbiguous() {
        KVLayout oneHead = KVLayout.preset("qwen2.5-0.5b").perRank(2);
        KVException e = assertThrows(KVException.class,
                () -> new VllmV1KeyScheme().plan(context(oneHead, 0, 2, 16), RequestTokens.of(1, 2)));
        assertTrue(e.getMessage().contains("kv heads") && e.hint().contains("--kv-heads"), e.getMessage());
        assertEquals(1, new VllmV1KeyScheme().replicationFactor(context(LLAMA, 0, 4, 16)), "8 heads x 4 ranks");
    }

    @Test
    void aHashBlockSizeThatDoesNotDivideTheBlockSizeIsRefused() {
        KVException e = assertThrows(KVException.class, () -> new VllmV1KeyScheme(VllmV1Options.DEFAULTS
                .withHashBlockTokens(24)).plan(context(LLAMA, 0, 1, 64), RequestTokens.of(new int[128])));
        assertTrue(e.getMessage().contains("hash block size 24"), e.getMessage());
    }

    @Test
    void keySchemesFindsVllmV1ThroughTheServiceLoader() {
        assertInstanceOf(VllmV1KeyScheme.class, KeySchemes.byName("vllm-v1"));
        assertEquals(VllmHashAlgorithm.SHA256, ((VllmV1KeyScheme) KeySchemes.byName("vllm-v1")).options().hash());
    }
}
