package dev.kvconnector.lmcache.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.tensor.DType;
import java.util.LinkedHashMap;
import java.util.SequencedMap;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.AlphaChars;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

class LmcacheV1KeysTest {
    private static SequencedMap<String, String> tags(String... kv) {
        SequencedMap<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    @Test
    void chunkKeyJoinsModelWorldWorkerHashAndDtype() {
        assertEquals("meta-llama/Llama-3.1-8B@2@1@a1e0@bfloat16",
                LmcacheV1Keys.chunkKey("meta-llama/Llama-3.1-8B", 2, 1, "a1e0", DType.BF16, null));
    }

    @Test
    void layerKeyPutsTheLayerAfterTheDtypeAndTagsLast() {
        assertEquals("m@1@0@ff@half@3@lora%abc@user%x",
                LmcacheV1Keys.layerKey("m", 1, 0, "ff", DType.FP16, 3, tags("lora", "abc", "user", "x")));
    }

    @Test
    void parseReadsEveryPart() {
        LmcacheV1Keys.Key k = LmcacheV1Keys.parse("m@4@3@-1f@fp8_e4m3fn@12@lora%abc");
        assertEquals("m", k.model());
        assertEquals(4, k.worldSize());
        assertEquals(3, k.workerId());
        assertEquals("-1f", k.chunkHash());
        assertEquals(DType.FP8_E4M3, k.dtype());
        assertEquals(12, k.layer());
        assertEquals(tags("lora", "abc"), k.tags());
        assertEquals(-1, LmcacheV1Keys.parse("m@1@0@ab@float").layer());
    }

    @Test
    void theOlderFp8NameIsAccepted() {
        assertEquals(DType.FP8_E4M3, LmcacheV1Keys.parse("m@1@0@ab@fp8_e4m3").dtype());
    }

    @Test
    void aModelNameWithAtIsRefused() {
        KVException e = assertThrows(KVException.class,
                () -> LmcacheV1Keys.chunkKey("org@model", 1, 0, "ab", DType.BF16, null));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    }

    @Test
    void malformedKeysAndArgumentsAreRefused() {
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.parse("m@1@0@ab")).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.parse("m@1@1@ab@half")).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.parse("m@1@0@XYZ@half")).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.parse("m@1@0@ab@half@notatag")).code());
        assertEquals(ErrorCode.DTYPE_MISMATCH, assertThrows(KVException.class,
                () -> LmcacheV1Keys.parse("m@1@0@ab@complex64")).code());
        assertEquals(ErrorCode.DTYPE_MISMATCH, assertThrows(KVException.class,
                () -> LmcacheV1Keys.dtypeName(DType.INT64)).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.layerKey("m", 1, 0, "ab", DType.BF16, -1, null)).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> LmcacheV1Keys.chunkKey("m", 1, 0, "ab", DType.BF16, tags("a%b", "c"))).code());
    }

    @Test
    void everySpecDtypeNameRoundTrips() {
        for (String name : new String[] {"half", "bfloat16", "float", "double", "int8", "uint8", "fp8_e4m3fn",
                "fp8_e5m2"}) {
            assertEquals(name, LmcacheV1Keys.dtypeName(LmcacheV1Keys.dtypeOf(name)));
        }
    }

    @Property(tries = 300)
    void keysRoundTripThroughParse(@ForAll @AlphaChars @StringLength(min = 1, max = 20) String model,
                                   @ForAll @IntRange(min = 1, max = 64) int world,
                                   @ForAll @IntRange(min = 0, max = 63) int worker,
                                   @ForAll long hash, @ForAll @IntRange(min = -1, max = 200) int layer,
                                   @ForAll @AlphaChars @StringLength(min = 1, max = 5) String tag) {
        int w = worker % world;
        DType dtype = DType.values()[Math.floorMod(hash, 8)];
        String hex = Long.toHexString(hash);
        SequencedMap<String, String> tags = tags(tag, "v" + layer);
        String key = layer < 0 ? LmcacheV1Keys.chunkKey(model, world, w, hex, dtype, tags)
                : LmcacheV1Keys.layerKey(model, world, w, hex, dtype, layer, tags);
        LmcacheV1Keys.Key parsed = LmcacheV1Keys.parse(key);
        assertEquals(new LmcacheV1Keys.Key(model, world, w, hex, dtype, layer, tags), parsed);
        assertEquals(key, parsed.toString());
    }
}
