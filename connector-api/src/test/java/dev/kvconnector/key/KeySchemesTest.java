package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

class KeySchemesTest {
    @Test
    void byNameFindsAllThreeSchemesThroughServiceLoader() {
        assertInstanceOf(KvcV1KeyScheme.class, KeySchemes.byName("kvc-v1"));
        assertInstanceOf(LmcacheV0KeyScheme.class, KeySchemes.byName("lmcache-v0"));
        assertInstanceOf(VllmV0KeyScheme.class, KeySchemes.byName("vllm-v0"));
        assertTrue(KeySchemes.all().keySet().containsAll(java.util.Set.of("kvc-v1", "lmcache-v0", "vllm-v0")));
    }

    @Test
    void defaultSchemeIsKvcV1() {
        assertEquals(Granularity.CHUNK_LAYER, KeySchemes.byName(KeySchemes.DEFAULT).granularity());
        assertEquals(KeySchemes.DEFAULT, KvcV1KeyScheme.NAME);
    }

    @Test
    void unknownNameIsAnErrorListingKnownSchemes() {
        KVException e = assertThrows(KVException.class, () -> KeySchemes.byName("kvc-v9"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("kvc-v9"), e.getMessage());
        assertTrue(e.hint().contains("kvc-v1") && e.hint().contains("lmcache-v0") && e.hint().contains("vllm-v0"), e.hint());
    }
}
