package dev.kvconnector.kvctl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.kvconnector.kvctl.KvctlTest.Run;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine.ExitCode;

/** {@code kvctl key --scheme vllm-v1}, against the shared vLLM V1 vectors (from connector-api's test jar). */
class KeyCommandTest {
    private static JsonNode vectors;

    @TempDir
    static Path dir;
    private static Path case1;

    @BeforeAll
    static void loadVectors() throws IOException {
        try (InputStream in = KeyCommandTest.class.getResourceAsStream("/vllm-v1/vllm-v1-mooncake-store-vectors.json")) {
            vectors = new ObjectMapper().readTree(in);
        }
        JsonNode tokens = vectors.get("cases").get(1).get("token_ids");
        case1 = dir.resolve("case1.txt");
        Files.writeString(case1, StreamSupport.stream(tokens.spliterator(), false).map(JsonNode::asText)
                .collect(Collectors.joining("\n")) + "\n");
    }

    private static Run vllmV1(String... extra) {
        List<String> args = new ArrayList<>(List.of("key", "--scheme", "vllm-v1", "--model", "meta-llama/Llama-3.1-8B",
                "--tp-size", "4", "--kv-heads", "8", "--tokens-file", case1.toString()));
        args.addAll(List.of(extra));
        return KvctlTest.kvctl(args.toArray(String[]::new));
    }

    private static String expectedKeys(JsonNode vector, String rank) {
        return StreamSupport.stream(vector.get("keys").get(rank).spliterator(), false).map(JsonNode::asText)
                .collect(Collectors.joining("\n")) + "\n";
    }

    private static JsonNode vector(String section, String algo, int blockSize, String label) {
        for (JsonNode v : vectors.get(section)) {
            if (v.get("case").asInt() == 1 && v.get("algo").asText().equals(algo) && v.get("block_size").asInt() == blockSize
                    && (label == null || label.equals(v.path("label").asText()))) {
                return v;
            }
        }
        throw new IllegalArgumentException("no vector " + algo + " " + blockSize + " " + label);
    }

    @Test
    void keyPrintsTheVectorsKeysOnePerLineInBlockOrderAndNothingElse() {
        Run r = vllmV1("--tp-rank", "3", "--block-size", "16");
        assertEquals(0, r.code(), r.err());
        assertEquals(expectedKeys(vector("vectors", "sha256", 16, null), "tp_rank_3"), r.out());
        assertEquals("", r.err());
        Run cbor = vllmV1("--tp-rank", "0", "--block-size", "64", "--hash", "sha256_cbor");
        assertEquals(expectedKeys(vector("vectors", "sha256_cbor", 64, null), "tp_rank_0"), cbor.out(), cbor.err());
    }

    @Test
    void keyHonoursCachePrefixLoraNameCacheSaltAndHashBlockSize() {
        assertEquals(expectedKeys(vector("extras", "sha256", 16, "cache_prefix"), "tp_rank_0"),
                vllmV1("--block-size", "16", "--cache-prefix", "deployA").out());
        assertEquals(expectedKeys(vector("extras", "sha256_cbor", 16, "lora"), "tp_rank_3"),
                vllmV1("--tp-rank", "3", "--block-size", "16", "--hash", "sha256_cbor", "--lora-name", "my-lora").out());
        assertEquals(expectedKeys(vector("extras", "sha256", 16, "cache_salt"), "tp_rank_0"),
                vllmV1("--block-size", "16", "--cache-salt", "tenant-salt").out());
        assertEquals(expectedKeys(vector("extras", "sha256", 64, "hash_block_size_16_block_size_64"), "tp_rank_3"),
                vllmV1("--tp-rank", "3", "--block-size", "64", "--hash-block-size", "16").out());
    }

    @Test
    void keyWithAHashSeedMatchesThePythonHashSeedVectors(@TempDir Path tmp) throws IOException {
        JsonNode v = null;
        for (JsonNode candidate : vectors.get("vectors")) {
            if (candidate.get("algo").asText().equals("xxhash") && candidate.get("block_size").asInt() == 64) {
                v = candidate;
            }
        }
        Path case0 = tmp.resolve("case0.txt");
        Files.writeString(case0, StreamSupport.stream(vectors.get("cases").get(0).get("token_ids").spliterator(), false)
                .map(JsonNode::asText).collect(Collectors.joining(",")));
        Run r = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--model", "m", "--kv-heads", "8", "--block-size", "64",
                "--hash", "xxhash", "--hash-seed", "0", "--tokens-file", case0.toString());
        assertEquals(0, r.code(), r.err());
        String expected = StreamSupport.stream(v.get("block_hashes").spliterator(), false)
                .map(h -> "m@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@" + h.asText()).collect(Collectors.joining("\n")) + "\n";
        assertEquals(expected, r.out());
    }

    @Test
    void keyHelpListsTheVllmV1Options() {
        for (String flag : List.of("-h", "--help")) {
            Run r = KvctlTest.kvctl("key", flag);
            assertEquals(0, r.code(), r.err());
            assertTrue(r.out().contains("--hash-seed") && r.out().contains("--block-size") && r.out().contains("vllm-v1"),
                    r.out());
        }
    }

    @Test
    void aBlockSizeOfZeroOrBelowIsAUsageErrorNamingTheOption() {
        for (String size : List.of("0", "-16")) {
            Run r = vllmV1("--block-size", size);
            assertEquals(ExitCode.USAGE, r.code());
            assertTrue(r.err().contains("--block-size") && r.err().contains(size), r.err());
            assertEquals("", r.out());
        }
        Run missing = vllmV1();
        assertEquals(ExitCode.USAGE, missing.code());
        assertTrue(missing.err().contains("--block-size is required"), missing.err());
    }

    @Test
    void aTokenIdOutsideInt32IsAnErrorNamingTheTokenAndTheFile(@TempDir Path tmp) throws IOException {
        for (String bad : List.of("2147483648", "-2147483649")) {
            Path f = tmp.resolve("bad.txt");
            Files.writeString(f, "1 2 " + bad + " 4");
            Run r = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--kv-heads", "8", "--block-size", "2", "--tokens-file",
                    f.toString());
            assertEquals(Kvctl.EXIT_FAILURE, r.code());
            assertTrue(r.err().contains("token 3 of " + f) && r.err().contains(bad) && r.err().contains("outside int32"),
                    r.err());
            assertEquals("", r.out());
        }
    }

    @Test
    void anUnknownHashNameIsAUsageErrorListingTheKnownOnes() {
        Run r = vllmV1("--block-size", "16", "--hash", "md5");
        assertEquals(ExitCode.USAGE, r.code());
        assertTrue(r.err().contains("--hash") && r.err().contains("'md5'") && r.err().contains("xxhash_cbor"), r.err());
    }

    @Test
    void aHashSeedWithoutAValueIsAUsageErrorNamingTheOption() {
        Run last = vllmV1("--block-size", "16", "--hash-seed");
        assertEquals(ExitCode.USAGE, last.code());
        assertTrue(last.err().contains("--hash-seed"), last.err());
        Run beforeAnother = vllmV1("--hash-seed", "--block-size", "16");
        assertEquals(ExitCode.USAGE, beforeAnother.code());
        assertTrue(beforeAnother.err().contains("--hash-seed"), beforeAnother.err());
        Run empty = vllmV1("--block-size", "16", "--hash-seed=");
        assertEquals(ExitCode.USAGE, empty.code());
        assertTrue(empty.err().contains("--hash-seed is empty"), empty.err());
        Run xxWithout = vllmV1("--block-size", "16", "--hash", "xxhash");
        assertEquals(ExitCode.USAGE, xxWithout.code());
        assertTrue(xxWithout.err().contains("PYTHONHASHSEED"), xxWithout.err());
    }

    @Test
    void aModelIdEndingInSlashIsAUsageErrorNamingTheOption() {
        Run r = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--model", "meta-llama/Llama-3.1-8B/", "--kv-heads", "8",
                "--block-size", "16", "--tokens", "1,2,3");
        assertEquals(ExitCode.USAGE, r.code());
        assertTrue(r.err().contains("--model 'meta-llama/Llama-3.1-8B/' ends in '/'"), r.err());
    }

    @Test
    void mlaNeedsNoKvHeadsAndEveryRankPrintsTpRankZero() {
        Run r = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--model", "deepseek-ai/DeepSeek-V3", "--layout",
                "deepseek-v3-mla", "--tp-rank", "5", "--tp-size", "8", "--block-size", "2", "--tokens", "1,2,3,4,5");
        assertEquals(0, r.code(), r.err());
        List<String> lines = r.out().lines().toList();
        assertEquals(2, lines.size(), "two full blocks of 2; the fifth token gets no key");
        assertTrue(lines.stream().allMatch(l -> l.startsWith("DeepSeek-V3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@")), r.out());
        Run gqa = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--kv-heads", "8", "--block-size", "2", "--tokens", "1,2");
        assertEquals(0, gqa.code(), gqa.err());
        Run noHeads = KvctlTest.kvctl("key", "--scheme", "vllm-v1", "--block-size", "2", "--tokens", "1,2");
        assertEquals(ExitCode.USAGE, noHeads.code());
        assertTrue(noHeads.err().contains("--kv-heads is required"), noHeads.err());
    }

    @Test
    void aTpRankOutsideTheTpSizeIsAUsageError() {
        Run r = vllmV1("--block-size", "16", "--tp-rank", "4");
        assertEquals(ExitCode.USAGE, r.code());
        assertTrue(r.err().contains("--tp-rank 4 is outside --tp-size 4"), r.err());
    }

    @Test
    void vllmV1OptionsGivenToAnotherSchemeAreRefusedNotIgnored() {
        Run r = KvctlTest.kvctl("key", "--scheme", "lmcache-v0", "--hash", "sha256", "--tokens", "1,2");
        assertEquals(ExitCode.USAGE, r.code());
        assertTrue(r.err().contains("--hash applies only to --scheme vllm-v1"), r.err());
    }
}
