package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.key.vllm.VllmV1KeyScheme;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A layer-wise drop-select whose producer will not come (the proxy gave its prefill up) ends at once when abandoned,
 * as an ABSENT miss naming why, instead of at its layer timeout; a load that has ended has nothing to abandon. Both
 * drop-selects: per-layer objects (kvc-v1) and chunk objects (vllm-v1).
 */
class DropAbandonTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final long TIMEOUT_MS = 60_000;

    @ParameterizedTest
    @ValueSource(strings = {"kvc-v1", VllmV1KeyScheme.NAME})
    void anAbandonedLayerWiseLoadMissesAtOnceNamingWhy(String scheme) throws Exception {
        int tokens = 32;
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             PagedKVCache cache = PagedKVCache.allocate(LAYOUT, 4);
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).keyScheme(scheme)
                     .layerTimeoutMillis(TIMEOUT_MS).build()) {
            RequestTokens plain = RequestTokens.of(new int[tokens]);
            // vLLM V1 keys bind no namespace: the request is its tokens alone.
            RequestTokens request = scheme.equals(VllmV1KeyScheme.NAME) ? plain : plain.inNamespace("t-abandoned");
            long start = System.nanoTime();
            try (DropSession drop = kv.beginDropSelect(request, DropTarget.paged(cache,
                    new BlockTable(new int[] {0, 1}, 16, tokens)))) {
                Thread.sleep(50);

                assertTrue(drop.abandon("every P failed"), "the load was waiting for its producer");

                assertFalse(drop.awaitLayer(0));
                DropResult r = drop.result();
                assertEquals(MissReason.ABSENT, r.reason(), r::toString);
                assertTrue(r.detail().contains("will not arrive: every P failed"), r.detail());
                assertFalse(drop.abandon("again"), "an ended load has nothing to abandon");
            }
            assertTrue(System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS / 4),
                    "the load waited as if it had not been abandoned");
        }
    }
}
