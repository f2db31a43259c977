package dev.kvconnector.lmcache.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.lmcache.client.LmStore;
import dev.kvconnector.lmcache.format.LmChunkFormat;
import dev.kvconnector.lmcache.format.LmRemoteMetadata;
import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.protocol.LmReplyHeader;
import dev.kvconnector.lmcache.protocol.LmWire;
import dev.kvconnector.lmcache.server.LmCacheServer;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.testkit.LeakCheck;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

@ExtendWith(LeakCheck.class)
class LmCacheConnectorsTest {
    private static final KVLayout MHA = new KVLayout("t", AttentionKind.MHA, 3, 2, 8, DType.BF16, 4, 16);
    private static final KVLayout MLA = new KVLayout("m", AttentionKind.MLA, 2, 1, 12, DType.BF16, 4, 16);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private static RequestTokens prompt(int n, int seed) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = seed * 100_000 + i;
        }
        return RequestTokens.of(t);
    }

    private static LmEngine connector(KVStore store, KVLayout layout) {
        return connector(store, layout, b -> b);
    }

    private static LmEngine connector(KVStore store, KVLayout layout, UnaryOperator<LmCacheConnectors.Builder> more) {
        return LmEngine.of(store, layout, b -> more.apply(b.chunkTokens(8).stagingBytes(16L << 20)));
    }

    @ParameterizedTest
    @EnumSource(LmChunkFormat.class)
    void dropSelectLoadsByteIdenticalKvInEveryFormat(LmChunkFormat format) {
        KVLayout layout = format == LmChunkFormat.V1_KV_MLA ? MLA : MHA;
        RequestTokens p = prompt(21, 1);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, layout, b -> b.format(format));
             PagedEngine a = PagedEngine.filled(layout, 21, 1);
             PagedEngine b = PagedEngine.empty(layout, 21, 2)) {
            assertEquals(3, lm.insert(p, a.cache, a.blocks), "chunks of 8, 8 and 5 tokens");
            assertEquals(21, lm.lookup(p));
            DropResult r = lm.dropSelect(p, b.cache, b.blocks);
            assertTrue(r.isComplete(), r.toString());
            assertTrue(a.sameKv(b, 0, 21));
        }
    }

    @Test
    void v1ObjectIsRemoteMetadataThenKv2ltdUnderTheV1Key() {
        RequestTokens p = prompt(8, 3);
        try (Arena arena = Arena.ofConfined();
             KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 8, 3)) {
            lm.insert(p, a.cache, a.blocks);
            String key = lm.keys(p).getFirst();
            assertTrue(key.matches("test/model@1@0@[0-9a-f]{64}@bfloat16"), key);
            long kv = 2L * 3 * 8 * 2 * 8 * 2;
            MemorySegment obj = arena.allocate(28 + kv);
            assertEquals(28 + kv, store.getInto(key, obj));
            assertEquals(LmRemoteMetadata.of((int) kv, 1, 3, 2, 3, 8, 16), LmRemoteMetadata.decode(obj, 0, 1));
            // KV_2LTD: all K layers first, then all V layers, each [T, H*D].
            long block = 8L * 2 * 8 * 2;
            for (int l = 0; l < 3; l++) {
                for (int t = 0; t < 2; t++) {
                    MemorySegment expected = a.tokens(arena, l, t, 0, 8);
                    assertEquals(-1, obj.asSlice(28 + ((long) t * 3 + l) * block, block).mismatch(expected));
                }
            }
        }
    }

    @Test
    void v0KeysFollowTheSpecVectorAndObjectsAreRawVllmLayout() {
        RequestTokens p = RequestTokens.of(0, 1, 2, 3, 4, 5, 6, 7);
        try (Arena arena = Arena.ofConfined();
             KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = LmEngine.of(store, MHA, b -> b.chunkTokens(4).format(LmChunkFormat.V0_VLLM)
                     .stagingBytes(16L << 20));
             PagedEngine a = PagedEngine.filled(MHA, 8, 4)) {
            List<String> keys = lm.keys(p);
            assertEquals("vllm@test/model@1@0@a1e03200f1f82ad2c1cec8795c271aaecf98f5aa2d151d2229ec5fa0c177cf77",
                    keys.get(0));
            assertEquals("vllm@test/model@1@0@b7ba39079729733940d601469f53c311e28249df7c29f60ac422ae74a40705cb",
                    keys.get(1));
            lm.insert(p, a.cache, a.blocks);
            long block = 4L * 2 * 8 * 2;
            MemorySegment obj = arena.allocate(3 * 2 * block);
            assertEquals(3 * 2 * block, store.getInto(keys.get(1), obj), "no header in the 2024 format");
            assertEquals(-1, obj.asSlice((2L * 2 + 1) * block, block).mismatch(a.tokens(arena, 2, 1, 4, 8)),
                    "[L, 2, T, H, D]: layer 2's V of tokens 4..8");
        }
    }

    @Test
    void lookupReturnsTheLongestPrefixOfWholeChunksAndInsertSkipsPresentChunks() {
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 20, 5)) {
            RequestTokens p = prompt(20, 5);
            assertEquals(0, lm.lookup(p));
            assertEquals(3, lm.insert(p, a.cache, a.blocks));
            assertEquals(0, lm.insert(p, a.cache, a.blocks), "every chunk is present already");
            store.remove(lm.keys(p).get(1));
            assertEquals(8, lm.lookup(p), "the prefix stops at the first absent chunk, though chunk 2 is present");
            assertEquals(1, lm.insert(p, a.cache, a.blocks), "only the absent chunk is written again");
            assertEquals(20, lm.lookup(p));
        }
    }

    @Test
    void withoutSaveUnfullChunkTheTrailingPartialChunkIsNeitherStoredNorLoaded() {
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, MHA, b -> b.saveUnfullChunk(false));
             PagedEngine a = PagedEngine.filled(MHA, 21, 6);
             PagedEngine b = PagedEngine.empty(MHA, 21, 7)) {
            RequestTokens p = prompt(21, 6);
            assertEquals(2, lm.insert(p, a.cache, a.blocks));
            assertEquals(16, lm.lookup(p));
            DropResult r = lm.dropSelect(p, b.cache, b.blocks);
            assertEquals(16, r.matchedTokens());
            assertFalse(r.isComplete());
            assertTrue(a.sameKv(b, 0, 16));
            assertTrue(b.allZero(16, 21));
            DropResult none = lm.dropSelect(prompt(5, 6), b.cache, b.blocks);
            assertEquals(MissReason.ABSENT, none.reason());
        }
    }

    @Test
    void aChunkWrittenWithAnotherShapeIsALayoutMismatchMissAndNothingIsLoaded() {
        KVLayout fewerHeads = new KVLayout("t", AttentionKind.MHA, 3, 1, 8, DType.BF16, 4, 16);
        RequestTokens p = prompt(16, 8);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine writer = connector(store, MHA);
             LmEngine reader = connector(store, fewerHeads);
             PagedEngine a = PagedEngine.filled(MHA, 16, 8);
             PagedEngine b = PagedEngine.empty(fewerHeads, 16, 9)) {
            writer.insert(p, a.cache, a.blocks);
            assertEquals(writer.keys(p), reader.keys(p), "same model and dtype: the same LMCache keys");
            assertEquals(16, reader.lookup(p), "lookup sees the keys; only a read can check the shape");
            DropResult r = reader.dropSelect(p, b.cache, b.blocks);
            assertEquals(MissReason.LAYOUT_MISMATCH, r.reason(), r.toString());
            assertTrue(r.detail().contains(reader.keys(p).getFirst()), r.detail());
            assertTrue(b.allZero(0, 16), "nothing reached the cache");
        }
    }

    @Test
    void metadataThatDisagreesWithTheChunkIsALayoutMismatchAndAnUnreadableHeaderIsCorrupt() {
        RequestTokens p = prompt(8, 10);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 8, 10);
             PagedEngine b = PagedEngine.empty(MHA, 8, 11);
             Arena arena = Arena.ofConfined()) {
            lm.insert(p, a.cache, a.blocks);
            String key = lm.keys(p).getFirst();
            long size = store.size(key);
            MemorySegment obj = arena.allocate(size);
            store.getInto(key, obj);
            obj.set(INT, 4, LmWire.FMT_KV_T2D);
            store.put(key, obj, PutOptions.DEFAULT);
            DropResult wrongFormat = lm.dropSelect(p, b.cache, b.blocks);
            assertEquals(MissReason.LAYOUT_MISMATCH, wrongFormat.reason(), wrongFormat.toString());
            obj.set(INT, 8, 99);
            store.put(key, obj, PutOptions.DEFAULT);
            DropResult badDtype = lm.dropSelect(p, b.cache, b.blocks);
            assertEquals(MissReason.CORRUPT, badDtype.reason(), badDtype.toString());
            store.put(key, obj.asSlice(0, size - 1), PutOptions.DEFAULT);
            DropResult truncated = lm.dropSelect(p, b.cache, b.blocks);
            assertEquals(MissReason.LAYOUT_MISMATCH, truncated.reason(), truncated.toString());
            assertTrue(b.allZero(0, 8));
        }
    }

    @Test
    void aMismatchInALaterChunkEndsThePrefixBeforeIt() {
        RequestTokens p = prompt(24, 12);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine lm = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 24, 12);
             PagedEngine b = PagedEngine.empty(MHA, 24, 13);
             Arena arena = Arena.ofConfined()) {
            lm.insert(p, a.cache, a.blocks);
            String second = lm.keys(p).get(1);
            MemorySegment junk = arena.allocate(40);
            store.put(second, junk, PutOptions.DEFAULT);
            DropResult r = lm.dropSelect(p, b.cache, b.blocks);
            assertEquals(8, r.matchedTokens(), r.toString());
            assertTrue(a.sameKv(b, 0, 8));
            assertTrue(b.allZero(8, 24));
        }
    }

    @Test
    void consumeRemovesTheLoadedChunksAndRetainIsTheDefault() {
        RequestTokens p = prompt(16, 14);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine retain = connector(store, MHA);
             LmEngine consume = connector(store, MHA, b -> b.dropMode(DropMode.CONSUME));
             PagedEngine a = PagedEngine.filled(MHA, 16, 14);
             PagedEngine b = PagedEngine.empty(MHA, 16, 15)) {
            retain.insert(p, a.cache, a.blocks);
            assertTrue(retain.dropSelect(p, b.cache, b.blocks).isComplete());
            assertEquals(16, retain.lookup(p), "retained for reuse");
            assertTrue(consume.dropSelect(p, b.cache, b.blocks).isComplete());
            assertEquals(0, retain.lookup(p));
        }
    }

    @Test
    void badConfigurationIsRefusedWithTheReason() {
        try (KVStore store = KVStores.open("memory:?capacity=1MiB")) {
            KVException at = assertThrows(KVException.class,
                    () -> LmCacheConnectors.builder(store, MHA).modelId("org@model").build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, at.code());
            assertTrue(at.getMessage().contains("'@'"), at.getMessage());
            KVException mla = assertThrows(KVException.class, () -> LmCacheConnectors.builder(store, MHA)
                    .modelId("m").format(LmChunkFormat.V1_KV_MLA).build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, mla.code());
            try (LmEngine lm = connector(store, MHA)) {
                KVException ns = assertThrows(KVException.class, () -> lm.lookup(prompt(8, 1).inNamespace("x")));
                assertEquals(ErrorCode.INVALID_ARGUMENT, ns.code());
                KVException hex = assertThrows(KVException.class,
                        () -> lm.keys(RequestTokens.ofChunkHashes(new String[] {"NotHex"}, 8, 8)));
                assertEquals(ErrorCode.INVALID_ARGUMENT, hex.code());
                assertEquals("test/model@1@0@00ff@bfloat16",
                        lm.keys(RequestTokens.ofChunkHashes(new String[] {"00ff"}, 8, 8)).getFirst(),
                        "engine-supplied hashes are used as they are");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(LmProtocolVersion.class)
    void overTheJavaLmcacheServerTheV1MetadataTravelsInTheProtocolHeader(LmProtocolVersion version) {
        LmCacheServer server = LmCacheServer.builder().protocol(version).capacityBytes(16L << 20).build().start();
        RequestTokens p = prompt(13, 16);
        String query = "127.0.0.1:" + server.boundPort() + "?protocol=" + version.name().toLowerCase();
        try (LmStore store = (LmStore) KVStores.open("lm://" + query);
             KVStore chunks = KVStores.open("lmcache+lm://" + query);
             LmEngine lm = connector(chunks, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 13, 16);
             PagedEngine b = PagedEngine.empty(MHA, 13, 17);
             Arena arena = Arena.ofConfined()) {
            assertEquals(2, lm.insert(p, a.cache, a.blocks));
            assertEquals(13, lm.lookup(p));
            assertTrue(lm.dropSelect(p, b.cache, b.blocks).isComplete());
            assertTrue(a.sameKv(b, 0, 13));
            long kv = 2L * 3 * 5 * 2 * 8 * 2;
            MemorySegment dst = arena.allocate(kv + 64);
            LmReplyHeader reply = new LmReplyHeader();
            long r = store.getInto(lm.keys(p).get(1), dst, reply);
            if (version == LmProtocolVersion.V1) {
                assertEquals(kv, r, "no metadata inside the object: it is in the header");
                assertEquals(new dev.kvconnector.lmcache.protocol.LmObjectMeta(1, 3, 2, 3, 5, 16), reply.meta());
            } else {
                assertEquals(28 + kv, r, "v0 has no header fields for it, so the object carries the metadata");
            }
            assertThrows(KVException.class, () -> connector(chunks, MHA, c -> c.dropMode(DropMode.CONSUME)));
            KVException plain = assertThrows(KVException.class, () -> connector(store, MHA));
            assertEquals(ErrorCode.INVALID_ARGUMENT, plain.code());
            assertTrue(plain.getMessage().contains("RemoteMetadata"), plain.getMessage());
        } finally {
            server.stop();
        }
    }

    @Test
    void aServerThatRefusesThePutFailsTheInsertNamingTheKeyAndLeaksNothing() {
        LmCacheServer server = LmCacheServer.builder().protocol(LmProtocolVersion.V1).capacityBytes(1024).build()
                .start();
        RequestTokens p = prompt(8, 18);
        try (KVStore store = KVStores.open("lmcache+lm://127.0.0.1:" + server.boundPort());
             LmEngine lm = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 8, 18)) {
            KVException e = assertThrows(KVException.class, () -> lm.insert(p, a.cache, a.blocks));
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertEquals(KVException.shortenKey(lm.keys(p).getFirst()), KVException.shortenKey(e.key()));
            assertTrue(e.getMessage().contains("127.0.0.1:" + server.boundPort()), e.getMessage());
            assertEquals(0, lm.lookup(p));
            assertEquals(GetResult.MISS, store.getInto(lm.keys(p).getFirst(), MemorySegment.NULL));
        } finally {
            server.stop();
        }
    }

    @Test
    void aLayerWiseDropSelectWaitsForTheChunkObjectsWhichAppearAfterTheProducersLastLayer() throws Exception {
        RequestTokens p = prompt(13, 20);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             LmEngine producer = connector(store, MHA);
             LmEngine consumer = connector(store, MHA);
             PagedEngine a = PagedEngine.filled(MHA, 13, 20);
             PagedEngine b = PagedEngine.empty(MHA, 13, 21)) {
            InsertSession insert = producer.connector.beginInsert(p);
            insert.putLayer(0, LayerSource.paged(a.cache, a.blocks));
            try (DropSession drop = consumer.connector.beginDropSelect(p, DropTarget.paged(b.cache, b.blocks))) {
                insert.putLayer(1, LayerSource.paged(a.cache, a.blocks));
                assertEquals(0, consumer.lookup(p), "no chunk object before the last layer");
                insert.putLayer(2, LayerSource.paged(a.cache, a.blocks));
                insert.commit();
                assertTrue(drop.awaitLayer(0));
                assertTrue(drop.result().isComplete(), drop.result().toString());
            }
            assertTrue(a.sameKv(b, 0, 13));
        }
    }

    @Test
    void skipExistingNeedsAChunkObjectCodec() {
        try (KVStore store = KVStores.open("memory:?capacity=1MiB")) {
            KVException e = assertThrows(KVException.class,
                    () -> StoreConnector.builder(store, MHA).skipExisting(true).build());
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("kvc-raw"), e.getMessage());
        }
    }

    @ParameterizedTest
    @EnumSource(value = LmChunkFormat.class, names = {"V1_KV_2LTD", "V0_VLLM"})
    void aKeySchemeNameAloneImpliesItsCodecAndWritesTheSameObjects(LmChunkFormat format) {
        RequestTokens p = prompt(13, 22);
        String scheme = format == LmChunkFormat.V0_VLLM ? "lmcache-v0" : "lmcache-v1";
        try (KVStore pairStore = KVStores.open("memory:?capacity=64MiB");
             KVStore namedStore = KVStores.open("memory:?capacity=64MiB");
             LmEngine pair = connector(pairStore, MHA, b -> b.format(format));
             StoreConnector named = StoreConnector.builder(namedStore, MHA).keyScheme(scheme).modelId("test/model")
                     .chunkTokens(8).build();
             PagedEngine a = PagedEngine.filled(MHA, 13, 22);
             Arena arena = Arena.ofConfined()) {
            pair.insert(p, a.cache, a.blocks);
            try (InsertSession s = named.beginInsert(p)) {
                s.putLayers(LayerSource.paged(a.cache, a.blocks));
                s.commit();
            }
            for (String key : pair.keys(p)) {
                long size = pairStore.size(key);
                assertEquals(size, namedStore.size(key), key);
                MemorySegment x = arena.allocate(size);
                MemorySegment y = arena.allocate(size);
                pairStore.getInto(key, x);
                namedStore.getInto(key, y);
                assertEquals(-1, x.mismatch(y), key);
            }
            assertEquals(13, named.lookup(p));
        }
    }
}
