package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.config.KVTransferParams;
import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.events.KvEvent;
import dev.kvconnector.key.ChunkKeys;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A decode engine that saves its decode KV ({@code --save-decode-kv}): after a request it stores the full chunks of
 * prompt and answer up to the last generated token, under the keys P uses, and its connector publishes them; a next
 * turn sent to D alone loads them and computes only the rest, with the single engine's tokens; chunks the store
 * holds already are not written again.
 */
class DecodeKvSaveTest {
    private static final ModelWeights WEIGHTS = ModelWeights.random(ModelConfig.tiny(21));
    private static final int CHUNK = 16;
    /** 60 prompt tokens and 20 generated: 80 tokens, 5 full chunks, the last of which holds the last token. */
    private static final int MAX_TOKENS = 20;
    private static final String TURN1 = "Document: blocks of sixteen tokens each. Question: why fixed";

    private static KVTransferParams fromProxy() {
        return KVTransferParams.builder().doRemoteDecode(true).doRemotePrefill(false).build();
    }

    private static int[] concat(int[]... parts) {
        return Arrays.stream(parts).flatMapToInt(Arrays::stream).toArray();
    }

    private static List<String> hashes(KVStoreConnector c, int[] tokens, int fullChunks) {
        return KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(c.keyContext(), null), CHUNK, 0,
                RequestTokens.of(Arrays.copyOf(tokens, fullChunks * CHUNK))).chunks().stream().map(ChunkKeys::hashHex)
                .toList();
    }

    private static StoreConnector.Builder connector(KVStore store) {
        ModelConfig c = WEIGHTS.config();
        return KVStoreConnector.builder(store, c.kvLayout()).modelId(c.modelId()).chunkTokens(CHUNK)
                .dropMode(DropMode.RETAIN);
    }

    @Test
    void theAnswersChunksReachTheStoreAndANextTurnSentToDecodeAloneComputesOnlyWhatFollowsThem() {
        List<KvEvent> dEvents = new CopyOnWriteArrayList<>();
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             KVStoreConnector pc = connector(store).build();
             KVStoreConnector dc = connector(store).events(dEvents::add).instanceId("d").build();
             Engine single = Engine.builder(WEIGHTS).prefixCache(CHUNK, null, "single").build();
             Engine p = Engine.builder(WEIGHTS).role(KVRole.PRODUCER, pc).sharePrefixes(true)
                     .prefixCache(CHUNK, null, "p").build();
             Engine d = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dc).sharePrefixes(true).saveDecodeKv(true)
                     .build()) {
            int[] turn1 = ByteTokenizer.encode(TURN1);
            assertEquals(60, turn1.length);
            Generation p1 = p.generate(turn1, 1, fromProxy(), t -> { });
            Generation d1 = d.generate(turn1, MAX_TOKENS, p1.kvTransferParams(), t -> { });
            assertArrayEquals(single.generate(turn1, MAX_TOKENS).tokens(), d1.tokens());

            // P stored the prompt: 3 full chunks and a partial one. D saved 79 computed tokens: 4 full chunks, the
            // 3 P stored (written again) and a new one; the fifth chunk holds the last token, whose KV D never wrote.
            int[] sequence1 = concat(turn1, d1.tokens());
            assertEquals(4 * CHUNK, dc.lookup(RequestTokens.of(sequence1)));
            assertEquals(new DecodeSaveStats(1, 0, 1, 3, 0), d.decodeSaveStats());
            List<KvEvent.Stored> stored = dEvents.stream().map(e -> assertInstanceOf(KvEvent.Stored.class, e))
                    .toList();
            assertEquals(hashes(dc, sequence1, 4), stored.stream().map(KvEvent.Stored::chunkHash).toList(),
                    "one Stored event per saved chunk, under the hashes a router computes");
            assertEquals(HexFormat.of().formatHex(KvcV1KeyScheme.rootHash(dc.keyContext(), null)),
                    stored.get(0).parentHash());
            for (KvEvent.Stored s : stored) {
                assertEquals(store.uri(), s.storeUri(), "the shared store, not D's own cache");
                assertEquals(CHUNK, s.tokens());
                assertEquals("d", s.instance());
            }

            // The next turn, to D alone as the proxy sends it when only a short suffix is missing: D loads the four
            // chunks, computes the other 49 tokens, answers as the single engine does, and saves the 8 full chunks of its
            // 132 computed tokens, 4 of them new.
            int[] turn2 = concat(sequence1, ByteTokenizer.encode(" User: and when is a block freed?"));
            assertEquals(113, turn2.length);
            AtomicInteger loaded = new AtomicInteger(-1);
            long computedBefore = d.metrics().prefillTokens();
            Generation d2 = d.generate(turn2, MAX_TOKENS, null, loaded::set, t -> { });
            assertArrayEquals(single.generate(turn2, MAX_TOKENS).tokens(), d2.tokens());
            assertEquals(Generation.PrefillSource.PARTIAL, d2.prefill());
            assertEquals(4 * CHUNK, loaded.get(), "what D reports to the proxy: the store's prefix");
            assertEquals(turn2.length - 4 * CHUNK, d.metrics().prefillTokens() - computedBefore);
            assertEquals(new DecodeSaveStats(2, 0, 1 + 4, 3 + 4, 0), d.decodeSaveStats());
            assertEquals(8 * CHUNK, dc.lookup(RequestTokens.of(concat(turn2, d2.tokens()))));

            // The same request again: the store holds every chunk D would save, so nothing is written or told.
            int eventsBefore = dEvents.size();
            Generation again = d.generate(turn2, MAX_TOKENS, null, t -> { }, t -> { });
            assertArrayEquals(d2.tokens(), again.tokens());
            assertEquals(new DecodeSaveStats(2, 1, 5, 7, 0), d.decodeSaveStats());
            assertEquals(eventsBefore, dEvents.size(), "no Stored event for chunks the store held");
        }
    }

    @Test
    void aSaveTheStoreRefusesIsCountedAndTheRequestIsStillServed() {
        // D's own store, too small for a save: D finds nothing, computes the prompt, and its save is refused.
        try (KVStore store = KVStores.open("memory:?capacity=16KiB&eviction=refuse");
             KVStoreConnector dc = connector(store).build();
             Engine plain = Engine.builder(WEIGHTS).build();
             Engine d = Engine.builder(WEIGHTS).role(KVRole.CONSUMER, dc).sharePrefixes(true).saveDecodeKv(true)
                     .build()) {
            int[] prompt = ByteTokenizer.encode(TURN1);
            Generation g = d.generate(prompt, MAX_TOKENS, null, t -> { });
            assertArrayEquals(plain.generate(prompt, MAX_TOKENS).tokens(), g.tokens());
            assertEquals(MissReason.ABSENT, g.missReason());
            assertEquals(new DecodeSaveStats(0, 0, 0, 0, 1), d.decodeSaveStats());
            assertEquals(0, dc.lookup(RequestTokens.of(prompt)), "an aborted save leaves nothing visible");
        }
    }

    @Test
    void savingTheDecodeKvIsRefusedWhereNoLaterPromptCouldFindItNamingTheCause() {
        try (KVStore store = KVStores.open("memory:?capacity=16MiB");
             KVStoreConnector c = connector(store).build()) {
            KVException producer = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.PRODUCER, c).sharePrefixes(true).saveDecodeKv(true).build());
            assertEquals(ErrorCode.INVALID_CONFIG, producer.code());
            assertTrue(producer.getMessage().contains("kv_producer") && producer.getMessage().contains("decode"),
                    producer.getMessage());
            KVException none = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS).saveDecodeKv(true)
                    .build());
            assertEquals(ErrorCode.INVALID_CONFIG, none.code());
            // kvc-v1 keys in the transfer's namespace, objects with hidden states: no later prompt hashes to them.
            KVException namespaced = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.CONSUMER, c).saveDecodeKv(true).build());
            assertEquals(ErrorCode.INVALID_CONFIG, namespaced.code());
            assertTrue(namespaced.getMessage().contains("transfer id") && namespaced.getMessage().contains(
                    store.uri()), namespaced.getMessage());
            assertTrue(namespaced.hint().contains("--share-prefixes"), namespaced.hint());
            KVException p2p = assertThrows(KVException.class, () -> Engine.builder(WEIGHTS)
                    .role(KVRole.CONSUMER, null).p2p(P2pTransport.kvTransferConfig(KVRole.CONSUMER,
                            "mooncake-te://127.0.0.1?protocol=tcp", 1_000, null, "kvc-v1"))
                    .sharePrefixes(true).saveDecodeKv(true).build());
            assertEquals(ErrorCode.INVALID_CONFIG, p2p.code());
            assertTrue(p2p.getMessage().contains("peer-to-peer"), p2p.getMessage());
        }
        try (Engine d = Engine.builder(WEIGHTS).build()) {
            assertNull(d.decodeSaveStats(), "no decode save unless asked");
        }
    }
}
