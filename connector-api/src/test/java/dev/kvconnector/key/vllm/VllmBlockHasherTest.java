package dev.kvconnector.key.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class VllmBlockHasherTest {
    private static final HexFormat HEX = HexFormat.of();

    @Test
    void noneHashOfEverySeedAndAlgorithmMatchesTheVectors() {
        int checked = 0;
        for (Map.Entry<String, JsonNode> e : VllmVectors.ROOT.get("none_hashes").properties()) {
            String[] parts = e.getKey().split("\\|");
            VllmHashAlgorithm algo = VllmHashAlgorithm.byName(parts[0], "hash");
            String seed = parts[1].equals("default") ? null : parts[1].substring("PYTHONHASHSEED=".length());
            assertEquals(e.getValue().get("none_hash").asText(), HEX.formatHex(VllmBlockHasher.of(algo, seed).noneHash()),
                    e.getKey());
            checked++;
        }
        assertEquals(6, checked);
    }

    @Test
    void everyBlockHashOfEveryVectorMatches() {
        int checked = 0;
        for (JsonNode v : VllmVectors.ROOT.get("vectors")) {
            VllmBlockHasher hasher = VllmBlockHasher.of(VllmHashAlgorithm.byName(v.get("algo").asText(), "hash"),
                    VllmVectors.seed(v));
            int[] tokens = VllmVectors.tokens(v.get("case").asInt());
            assertEquals(v.get("num_tokens").asInt(), tokens.length);
            List<String> expected = VllmVectors.strings(v.get("block_hashes"));
            List<String> actual = hasher.blockHashes(tokens, v.get("block_size").asInt(), VllmExtraKeys.NONE).stream()
                    .map(HEX::formatHex).toList();
            assertEquals(expected, actual, v.get("algo") + " " + v.get("seed_mode") + " case " + v.get("case")
                    + " block " + v.get("block_size"));
            checked++;
        }
        assertEquals(20, checked);
    }

    @Test
    void loraNameAndCacheSaltExtrasMatchTheVectors() {
        int checked = 0;
        for (JsonNode v : VllmVectors.ROOT.get("extras")) {
            if (!v.has("block_hashes")) {
                continue;
            }
            VllmBlockHasher hasher = VllmBlockHasher.of(VllmHashAlgorithm.byName(v.get("algo").asText(), "hash"),
                    VllmVectors.seed(v));
            VllmExtraKeys extra = new VllmExtraKeys(VllmVectors.textOrNull(v, "lora_name"),
                    VllmVectors.textOrNull(v, "cache_salt"));
            List<String> actual = hasher.blockHashes(VllmVectors.tokens(v.get("case").asInt()),
                    v.get("block_size").asInt(), extra).stream().map(HEX::formatHex).toList();
            assertEquals(VllmVectors.strings(v.get("block_hashes")), actual, v.get("label") + " " + v.get("algo"));
            checked++;
        }
        assertEquals(4, checked);
    }

    @Test
    void cacheSaltGoesIntoBlockZeroOnlyAndLoraIntoEveryBlock() {
        VllmExtraKeys both = new VllmExtraKeys("my-lora", "tenant-salt");
        assertEquals(List.of("my-lora", "tenant-salt"), both.forBlock(0));
        assertEquals(List.of("my-lora"), both.forBlock(1));
        assertEquals(null, new VllmExtraKeys(null, "tenant-salt").forBlock(1));
        assertEquals(null, new VllmExtraKeys(null, "").forBlock(0), "vLLM ignores an empty salt");
        assertEquals(List.of(""), new VllmExtraKeys("", null).forBlock(3), "an empty LoRA name still counts");
    }

    @Test
    void aTrailingPartialBlockGetsNoHash() {
        int[] tokens = VllmVectors.tokens(1);
        VllmBlockHasher hasher = VllmBlockHasher.of(VllmHashAlgorithm.SHA256, null);
        assertEquals(275 / 16, hasher.blockHashes(tokens, 16, VllmExtraKeys.NONE).size());
        assertEquals(0, hasher.blockHashes(new int[] {1, 2, 3}, 16, VllmExtraKeys.NONE).size());
    }

    @Test
    void xxhashWithoutASeedIsRefusedBecauseVllmDrawsItsNoneHashAtRandom() {
        for (VllmHashAlgorithm a : List.of(VllmHashAlgorithm.XXHASH, VllmHashAlgorithm.XXHASH_CBOR)) {
            KVException e = assertThrows(KVException.class, () -> VllmBlockHasher.of(a, null));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("PYTHONHASHSEED") && e.getMessage().contains(a.vllmName()), e.getMessage());
        }
    }

    @Test
    void anEmptySeedIsRefused() {
        KVException e = assertThrows(KVException.class, () -> VllmBlockHasher.of(VllmHashAlgorithm.SHA256, ""));
        assertTrue(e.getMessage().contains("hash seed"), e.getMessage());
    }

    @Test
    void anUnknownAlgorithmNameIsAnErrorNamingTheFieldAndTheKnownNames() {
        KVException e = assertThrows(KVException.class, () -> VllmHashAlgorithm.byName("sha512", "--hash"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("--hash") && e.getMessage().contains("sha512"), e.getMessage());
        assertTrue(e.hint().contains("sha256_cbor") && e.hint().contains("xxhash_cbor"), e.hint());
    }

    @Test
    void aSaltWithAnUnpairedSurrogateIsRefused() {
        KVException e = assertThrows(KVException.class, () -> new VllmExtraKeys(null, "ab\uD800"));
        assertTrue(e.getMessage().contains("cache_salt"), e.getMessage());
        assertEquals("x\uD83D\uDE00", new VllmExtraKeys("x\uD83D\uDE00", null).loraName(), "a pair is fine");
    }

    @Test
    void blockHashesChainSoAChangedTokenChangesEveryLaterBlock() {
        VllmBlockHasher hasher = VllmBlockHasher.of(VllmHashAlgorithm.SHA256, null);
        int[] a = VllmVectors.tokens(2);
        int[] b = a.clone();
        b[40] ^= 1;
        List<byte[]> ha = hasher.blockHashes(a, 16, VllmExtraKeys.NONE);
        List<byte[]> hb = hasher.blockHashes(b, 16, VllmExtraKeys.NONE);
        for (int i = 0; i < ha.size(); i++) {
            if (i < 2) {
                assertEquals(HEX.formatHex(ha.get(i)), HEX.formatHex(hb.get(i)), "block " + i);
            } else {
                assertNotEquals(HEX.formatHex(ha.get(i)), HEX.formatHex(hb.get(i)), "block " + i);
            }
        }
    }
}
