package dev.kvconnector.key;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import java.util.Set;
import org.junit.jupiter.api.Test;

class KeySchemesTest {
    @Test
    void byNameFindsEverySchemeOfConnectorApiThroughServiceLoader() {
        assertInstanceOf(KvcV1KeyScheme.class, KeySchemes.byName("kvc-v1"));
        assertInstanceOf(VllmV0KeyScheme.class, KeySchemes.byName("vllm-v0"));
        assertInstanceOf(VllmV1KeyScheme.class, KeySchemes.byName("vllm-v1"));
        assertEquals(Set.of("kvc-v1", "vllm-v0", "vllm-v1"), KeySchemes.all().keySet(),
                "the LMCache schemes come from connector-lmcache, which connector-api does not see");
    }

    @Test
    void onlyKvcV1KeysBindARequestNamespaceAndTheOthersRefuseOne() {
        assertTrue(KeySchemes.byName("kvc-v1").bindsNamespace());
        KeyContext context = new KeyContext("m", dev.kvconnector.layout.KVLayout.preset("llama3-8b"), 0, 1, 16);
        for (String name : new String[] {"vllm-v0", "vllm-v1"}) {
            KeyScheme scheme = KeySchemes.byName(name);
            assertTrue(!scheme.bindsNamespace(), name);
            KVException e = assertThrows(KVException.class,
                    () -> scheme.plan(context, RequestTokens.of(new int[32]).inNamespace("req-1")));
            assertTrue(e.getMessage().contains("namespace"), e.getMessage());
        }
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
        assertTrue(e.hint().contains("kvc-v1") && e.hint().contains("vllm-v0") && e.hint().contains("vllm-v1"), e.hint());
    }
}
