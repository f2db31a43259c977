package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.layout.KVLayout;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.stream.IntStream;
import org.bouncycastle.crypto.digests.Blake2bDigest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VllmV0KeySchemeTest {
    private static final KeyScheme SCHEME = new VllmV0KeyScheme();
    private static final KeyContext LLAMA = KeyContext.of("meta-llama/Llama-3.1-8B", KVLayout.preset("llama3-8b"));

    private static String blake2b512Hex(byte[] message) {
        Blake2bDigest d = new Blake2bDigest(512);
        d.update(message, 0, message.length);
        byte[] out = new byte[64];
        d.doFinal(out, 0);
        return HexFormat.of().formatHex(out);
    }

    private static byte[] bytesUpTo(int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    /** RFC 7693 appendix A ("abc"), and vectors reproduced with python3 hashlib.blake2b(msg).hexdigest(). */
    @Test
    void blake2b512MatchesRfc7693AndPythonVectors() {
        assertEquals("ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                        + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
                blake2b512Hex("abc".getBytes(StandardCharsets.US_ASCII)));
        assertEquals("786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
                        + "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce",
                blake2b512Hex(new byte[0]));
        assertEquals("a8add4bdddfd93e4877d2746e62817b116364a1fa7bc148d95090bc7333b3673"
                        + "f82401cf7aa2e4cb1ecd90296e3f14cb5413f8ed77be73045b13914cdcd6a918",
                blake2b512Hex("The quick brown fox jumps over the lazy dog".getBytes(StandardCharsets.US_ASCII)));
        // Exactly one 128-byte block: the last block must not be compressed twice.
        assertEquals("2319e3789c47e2daa5fe807f61bec2a1a6537fa03f19ff32e87eecbfd64b7e0e"
                        + "8ccff439ac333b040f19b0c4ddd11a61e24ac1fe0f10a039806c5dcc0da3d115",
                blake2b512Hex(bytesUpTo(128)));
    }

    /**
     * Vectors computed independently with python3:
     * {@code python3 -c "import hashlib,struct; t=[1,2,3]; d=hashlib.blake2b(struct.pack('<%dq'%len(t),*t)).digest();
     * print(int.from_bytes(d[:8],'big'), d.hex())"}.
     */
    @ParameterizedTest
    @CsvSource({
        "'1,2,3', 12086052994506337185, a7ba4929f218aba1f1b1ab203ef057694b03dc8b57606363914393c0535a802b10d142e0a085c78a21dcc5605eb615839495e230641c5e93372fc16b73a4af02",
        "'0,1,2,3', 640708036498689194, 08e44090883e0caa8ec743c5ab57d09a7ba97dbed1cd5cc06eb64e543b8cfa0ddead99102315abe15c7c28bcd656c7cf3af134f77c2086c4060f1a578997d636",
        "'128000,9906,11,1917,0', 1364050299183526876, 12ee1485229973dcc3dde84d35c511092d60b09a7741ece4409a090a6eaccc1aae8f9bd337336bc8cb69f455ff09a4da7011b81478b0ee7ffd9bd46cd7decdb5"
    })
    void keysMatchVllmTensorHash(String tokens, String hash, String digestHex) {
        int[] ids = java.util.Arrays.stream(tokens.split(",")).mapToInt(Integer::parseInt).toArray();
        KeyPlan plan = SCHEME.plan(LLAMA, RequestTokens.of(ids));
        ChunkKeys only = plan.chunks().getFirst();
        assertArrayEquals(new String[] {hash + "_0"}, only.layerKeys());
        assertEquals(hash + "_hidden_0", only.hiddenKey());
        assertEquals(digestHex, only.hashHex());
    }

    @Test
    void hashAboveLongMaxIsPrintedUnsigned() {
        String key = SCHEME.plan(LLAMA, RequestTokens.of(1, 2, 3)).chunks().getFirst().layerKeys()[0];
        assertEquals("12086052994506337185_0", key);
        assertTrue(Long.parseUnsignedLong("12086052994506337185") < 0, "the vector must exercise the sign bit");
    }

    /** 1000 tokens span two 512-token update slices. python3: same one-liner with t=list(range(1000)). */
    @Test
    void longPromptsHashAcrossUpdateSlices() {
        int[] ids = IntStream.range(0, 1000).toArray();
        ChunkKeys only = SCHEME.plan(LLAMA, RequestTokens.of(ids)).chunks().getFirst();
        assertEquals("2672922296665261872_0", only.layerKeys()[0]);
        assertTrue(only.hashHex().startsWith("251820aac4f44730627660c16136f423"));
    }

    @Test
    void planIsOneObjectCoveringTheWholeRequestWithHiddenKeyAndNoManifest() {
        KeyPlan plan = SCHEME.plan(LLAMA.withRank(3, 4), RequestTokens.of(1, 2, 3));
        assertEquals("vllm-v0", plan.scheme());
        assertEquals(Granularity.WHOLE_REQUEST, plan.granularity());
        assertEquals(1, plan.chunks().size());
        ChunkKeys only = plan.chunks().getFirst();
        assertEquals(0, only.index());
        assertEquals(0, only.startToken());
        assertEquals(3, only.endToken());
        assertEquals(3, plan.totalTokens());
        assertArrayEquals(new String[] {"12086052994506337185_3"}, only.layerKeys());
        assertEquals("12086052994506337185_hidden_3", only.hiddenKey());
        assertNull(only.manifestKey());
        assertEquals(128, only.hashHex().length());
    }

    @Test
    void keyIgnoresModelAndLayoutLikeVllmV0() {
        KeyContext other = new KeyContext("other/model", KVLayout.preset("deepseek-v3-mla"), 0, 1, 16);
        assertEquals(SCHEME.plan(LLAMA, RequestTokens.of(7, 8)).chunks().getFirst().layerKeys()[0],
                SCHEME.plan(other, RequestTokens.of(7, 8)).chunks().getFirst().layerKeys()[0]);
    }

    @Test
    void negativeTokensAreSignExtendedToInt64() {
        // python3: t=[-1] packs as eight 0xff bytes, the same as hashing that byte string directly.
        byte[] allOnes = new byte[8];
        java.util.Arrays.fill(allOnes, (byte) 0xff);
        assertEquals(blake2b512Hex(allOnes), SCHEME.plan(LLAMA, RequestTokens.of(-1)).chunks().getFirst().hashHex());
    }

    @Test
    void engineChunkHashesAreRefusedBecauseTheKeyNeedsTokens() {
        RequestTokens hashes = RequestTokens.ofChunkHashes(new String[] {"a", "b"}, 16, 20);
        KVException e = assertThrows(KVException.class, () -> SCHEME.plan(LLAMA, hashes));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("prompt tokens"), e.getMessage());
        assertTrue(e.hint().contains("kvc-v1"), e.hint());
    }

    @Test
    void namespaceIsRefusedRatherThanSilentlyDropped() {
        KVException e = assertThrows(KVException.class,
                () -> SCHEME.plan(LLAMA, RequestTokens.of(1, 2).inNamespace("transfer-1")));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("transfer-1"), e.getMessage());
    }
}
