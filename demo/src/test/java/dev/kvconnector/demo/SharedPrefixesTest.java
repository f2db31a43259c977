package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * 1P1D with shared prefixes: P keeps a prefix cache and stores every prompt under keys without a transfer id, D
 * retains what it loads; a next turn computes on P only what P's cache lacks, and D still loads the whole prompt.
 */
class SharedPrefixesTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(13));
    private static final int CHUNK = 16;
    private static final int MAX_TOKENS = 8;

    private static KVTransferParams fromProxy() {
        return KVTransferParams.builder().doRemoteDecode(true).doRemotePrefill(false).build();
    }

    @Test
    void aSecondTurnReusesPsCacheAndDStillLoadsTheWholePromptFromTheStore() {
        ModelConfig c = WEIGHTS.config();
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             KVStoreConnector pc = KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId())
                     .chunkTokens(CHUNK).dropMode(DropMode.RETAIN).build();
             KVStoreConnector dc = KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId())
                     .chunkTokens(CHUNK).dropMode(DropMode.RETAIN).build();
             Engine single = Engine.builder(WEIGHTS).build();
             Engine p = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, pc).sharePrefixes(true)
                     .prefixCache(CHUNK, null, "p").build();
             Engine d = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dc).sharePrefixes(true).build()) {
            int[] turn1 = ByteTokenizer.encode("Context: a shared document about paged KV caches. Q: what is a block?");
            int[] answer1 = single.generate(turn1, MAX_TOKENS).tokens();
            Generation p1 = p.generate(turn1, 1, fromProxy(), t -> { });
            Generation d1 = d.generate(turn1, MAX_TOKENS, p1.kvTransferParams(), t -> { });
            assertArrayEquals(answer1, d1.tokens());

            int[] turn2 = Arrays.copyOf(turn1, turn1.length + answer1.length);
            System.arraycopy(answer1, 0, turn2, turn1.length, answer1.length);
            int[] want = single.generate(turn2, MAX_TOKENS).tokens();
            Generation p2 = p.generate(turn2, 1, fromProxy(), t -> { });
            Generation d2 = d.generate(turn2, MAX_TOKENS, p2.kvTransferParams(), t -> { });

            assertArrayEquals(want, d2.tokens());
            assertEquals(Generation.PrefillSource.CACHED, p2.prefill());
            int reused = turn1.length / CHUNK * CHUNK;
            assertEquals(turn1.length + turn2.length - reused, p.metrics().prefillTokens());
            assertEquals(2, p.metrics().inserts(), "P inserts the whole prompt, its cached chunks included");
            assertEquals(2, d.metrics().loadedPrefills());
            // No hidden states: D computes each prompt's last token, nothing else.
            assertEquals(2, d.metrics().prefillTokens());
            // Keys without a transfer id, retained after the load: the next request with the prompt finds them.
            assertEquals(turn2.length, dc.lookup(RequestTokens.of(turn2)));
            String firstChunk = KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(dc.keyContext(), null), CHUNK, 1,
                    RequestTokens.of(turn2)).chunks().get(0).layerKeys()[0];
            assertTrue(store.exists(firstChunk), firstChunk);
        }
    }
}
