package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.KVStoreConnector;
import org.junit.jupiter.api.Test;

/** A store that is down costs the engine its transfer, never the request. */
class StoreFailureTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(21));
    private static final KVTransferParams PARAMS = KVTransferParams.builder().transferId("t").build();

    @Test
    void producerServesTheRequestWhenTheStoreIsDown() {
        int[] prompt = ByteTokenizer.encode("insert into nowhere");
        try (KVStoreConnector c = KVStoreConnector.builder(new UnreachableStoreTestDouble(), WEIGHTS.config().kvLayout())
                .build();
             Engine p = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, c).build();
             Engine plain = Engine.builder(WEIGHTS).build()) {
            Generation g = p.generate(prompt, 5, PARAMS, t -> { });
            assertArrayEquals(plain.generate(prompt, 5).tokens(), g.tokens());
            assertEquals(1, p.metrics().insertFailures());
            assertEquals(0, p.metrics().inserts());
            assertEquals(Boolean.FALSE, g.kvTransferParams().doRemotePrefill(), "nothing was stored for D to load");
        }
    }

    @Test
    void consumerRecomputesWhenTheStoreIsDown() {
        int[] prompt = ByteTokenizer.encode("load from nowhere");
        try (KVStoreConnector c = KVStoreConnector.builder(new UnreachableStoreTestDouble(), WEIGHTS.config().kvLayout())
                .build();
             Engine d = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, c).build();
             Engine plain = Engine.builder(WEIGHTS).build()) {
            Generation g = d.generate(prompt, 5, PARAMS, t -> { });
            assertArrayEquals(plain.generate(prompt, 5).tokens(), g.tokens());
            assertEquals(Generation.PrefillSource.COMPUTED, g.prefill());
            assertEquals(1, d.metrics().loadFailures());
            assertEquals(1, d.metrics().prefillPasses());
        }
    }
}
