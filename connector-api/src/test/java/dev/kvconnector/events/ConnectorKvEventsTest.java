package dev.kvconnector.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.MissReason;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.key.KeyContext;
import dev.kvconnector.key.KvcV1KeyScheme;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The connector reports what it stores, consumes and fails to load, numbered in order, to its listener. */
class ConnectorKvEventsTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int CHUNK = 16;
    private static final int TOKENS = 40;

    private static RequestTokens prompt(int seed) {
        return RequestTokens.of(IntStream.range(0, TOKENS).map(i -> seed + i).toArray());
    }

    @Test
    void commitEmitsOneStoredEventPerChunkChainedFromTheRootAndConsumeThenMissFollowInSequence() {
        List<KvEvent> events = new ArrayList<>();
        List<KvEventSource> attached = new ArrayList<>();
        KvEventListener listener = new KvEventListener() {
            @Override
            public void onEvent(KvEvent event) {
                events.add(event);
            }

            @Override
            public void onAttach(KvEventSource source) {
                attached.add(source);
            }
        };
        BlockTable table = new BlockTable(new int[] {0, 1, 2}, 16, TOKENS);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 3);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK).modelId("m")
                     .dropMode(DropMode.CONSUME).events(listener).instanceId("engine-a").build()) {
            assertEquals(1, attached.size());
            KvEventSource src = attached.get(0);
            String root = HexFormat.of().formatHex(KvcV1KeyScheme.rootHash(kv.keyContext(), null));
            assertEquals(root, src.rootHash());
            assertEquals(CHUNK, src.chunkTokens());
            assertEquals("engine-a", src.instance());
            try (InsertSession s = kv.beginInsert(prompt(5))) {
                s.putLayers(LayerSource.paged(source, table));
                s.commit();
            }
            // 40 tokens in 16-token chunks: 16, 16 and a kept partial 8.
            assertEquals(3, events.size(), events.toString());
            var expected = KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(kv.keyContext(), null), CHUNK, 0,
                    prompt(5)).chunks();
            String parent = root;
            for (int c = 0; c < 3; c++) {
                KvEvent.Stored st = assertInstanceOf(KvEvent.Stored.class, events.get(c));
                assertEquals(c, st.sequence());
                assertEquals(src.epoch(), st.epoch());
                assertEquals(expected.get(c).hashHex(), st.chunkHash());
                assertEquals(parent, st.parentHash());
                assertEquals(c < 2 ? 16 : 8, st.tokens());
                assertEquals(LAYOUT.numLayers(), st.layers());
                assertEquals(store.uri(), st.storeUri());
                assertEquals("kvc-v1", st.keyScheme());
                assertEquals("engine-a", st.instance());
                parent = st.chunkHash();
            }

            DropResult hit = kv.dropSelect(prompt(5), DropTarget.paged(target, table));
            assertTrue(hit.isComplete(), hit.toString());
            assertEquals(6, events.size(), events.toString());
            for (int c = 0; c < 3; c++) {
                KvEvent.Removed r = assertInstanceOf(KvEvent.Removed.class, events.get(3 + c));
                assertEquals(RemovalReason.CONSUMED, r.reason());
                assertEquals(expected.get(c).hashHex(), r.chunkHash());
                assertEquals(3 + c, r.sequence());
            }

            DropResult miss = kv.dropSelect(prompt(5), DropTarget.paged(target, table));
            assertEquals(MissReason.ABSENT, miss.reason());
            KvEvent.LoadFailed f = assertInstanceOf(KvEvent.LoadFailed.class, events.get(6));
            assertEquals(MissReason.ABSENT, f.reason());
            assertEquals(expected.get(0).hashHex(), f.chunkHash());
            assertEquals(TOKENS, f.requestedTokens());
            assertEquals(6, f.sequence());
            assertEquals(7, events.size());
        }
    }

    @Test
    void aListenerThatThrowsGoesToTheErrorHandlerAndTheInsertStillCommits() {
        List<String> errors = new ArrayList<>();
        BlockTable table = new BlockTable(new int[] {0, 1, 2}, 16, TOKENS);
        try (KVStore store = KVStores.open("memory:?capacity=64MiB");
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(CHUNK)
                     .errorHandler((where, failure) -> errors.add(where + ": " + failure.getMessage()))
                     .events(e -> {
                         throw new IllegalStateException("listener broke");
                     }).instanceId("engine-b").build()) {
            try (InsertSession s = kv.beginInsert(prompt(9))) {
                s.putLayers(LayerSource.paged(source, table));
                s.commit();
            }
            assertEquals(TOKENS, kv.lookup(prompt(9)));
            assertEquals(3, errors.size(), errors.toString());
            assertTrue(errors.get(0).contains("engine-b") && errors.get(0).contains("listener broke"), errors.get(0));
        }
    }

    @Test
    void withoutAnInstanceNameTheEventsCarryPidAtHostAndWithoutAListenerTheConnectorEmitsNothing() {
        List<KvEventSource> attached = new ArrayList<>();
        try (KVStore store = KVStores.open("memory:?capacity=16MiB");
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).events(new KvEventListener() {
                 @Override
                 public void onEvent(KvEvent event) {
                 }

                 @Override
                 public void onAttach(KvEventSource source) {
                     attached.add(source);
                 }
             }).build()) {
            assertTrue(attached.get(0).instance().startsWith(ProcessHandle.current().pid() + "@"),
                    attached.get(0).instance());
            assertEquals(0, kv.lookup(prompt(1)));
        }
    }

    @Test
    void planFromRootGivesThePlansHashes() {
        KeyContext ctx = new KeyContext("m", LAYOUT, 0, 1, CHUNK);
        var plan = new KvcV1KeyScheme().plan(ctx, prompt(3)).chunks();
        var fromRoot = KvcV1KeyScheme.planFromRoot(KvcV1KeyScheme.rootHash(ctx, null), CHUNK, 0, prompt(3)).chunks();
        assertEquals(plan.size(), fromRoot.size());
        for (int c = 0; c < plan.size(); c++) {
            assertEquals(plan.get(c).hashHex(), fromRoot.get(c).hashHex());
        }
    }
}
