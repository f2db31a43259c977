package dev.kvconnector.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The connector picks its data path from the store's declared capabilities, never from the store's class. */
class StoreCapabilityPathsTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int TOKENS = 300;

    /** Inserts from and drop-selects into host paged caches; returns the store double after checking the bytes. */
    private static CountingStoreTestDouble roundTrip(Set<StoreCapability> capabilities, DropMode mode) {
        CountingStoreTestDouble store = store(capabilities);
        DropResult r = roundTrip(store, mode);
        assertTrue(r.isComplete(), r.toString());
        return store;
    }

    private static CountingStoreTestDouble store(Set<StoreCapability> capabilities) {
        return new CountingStoreTestDouble(KVStores.open("memory:?capacity=1GiB"), capabilities);
    }

    /**
     * Inserts from and drop-selects into host paged caches over {@code store}; checks the bytes of a complete
     * drop-select, and that the drop-select gave back every staging lease however it ended.
     */
    private static DropResult roundTrip(CountingStoreTestDouble store, DropMode mode) {
        int[] ids = new int[TOKENS];
        for (int i = 0; i < TOKENS; i++) {
            ids[i] = 40 + i;
        }
        RequestTokens prompt = RequestTokens.of(ids);
        try (store;
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 40);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 40);
             KVStoreConnector kv = KVStoreConnector.builder(store, LAYOUT).dropMode(mode).build()) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                Segments.fill(source.tensor(l, 0), l);
                Segments.fill(source.tensor(l, 1), 100 + l);
            }
            BlockTable from = new BlockTable(range(0, 19), 16, TOKENS);
            BlockTable to = new BlockTable(range(21, 40), 16, TOKENS);
            try (InsertSession insert = kv.beginInsert(prompt)) {
                for (int l = 0; l < LAYOUT.numLayers(); l++) {
                    insert.putLayer(l, source, from);
                }
                insert.commit();
            }
            DropResult r;
            try {
                r = kv.dropSelect(prompt, DropTarget.paged(target, to));
            } finally {
                assertEquals(0, ((StoreConnector) kv).staging().outstandingLeases(), "a staging lease was kept");
            }
            if (!r.isComplete()) {
                return r;
            }
            long tb = LAYOUT.bytesPerTokenPerTensor();
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < TOKENS; t++) {
                    assertEquals(-1, MemorySegment.mismatch(source.tensor(l, 1), from.slot(t) * tb,
                            from.slot(t) * tb + tb, target.tensor(l, 1), to.slot(t) * tb, to.slot(t) * tb + tb),
                            "layer " + l + " token " + t);
                }
            }
            return r;
        }
    }

    @Test
    void aStoreThatClaimsAndViewsIsWrittenAndReadInPlace() {
        CountingStoreTestDouble s = roundTrip(EnumSet.of(StoreCapability.CLAIM, StoreCapability.VIEW,
                StoreCapability.REMOVE, StoreCapability.BATCH, StoreCapability.LOCAL_MEMORY), DropMode.CONSUME);
        int objects = 2 * LAYOUT.numLayers();
        assertEquals(objects, s.claims.get(), "one claim per chunk and layer");
        assertEquals(objects, s.views.get(), "one view per chunk and layer");
        assertEquals(1, s.putBatches.get(), "only the manifests are put");
        assertEquals(1, s.getIntos.get(), "only the manifests are read, in one batch");
        assertEquals(1, s.removes.get(), "the consumed entry is removed in one batch");
    }

    @Test
    void aStoreWithoutThemTakesPooledStagingWithImmutableLayerPuts() {
        CountingStoreTestDouble s = roundTrip(EnumSet.of(StoreCapability.REMOVE, StoreCapability.BATCH,
                StoreCapability.LOCAL_MEMORY), DropMode.CONSUME);
        assertEquals(0, s.claims.get());
        assertEquals(0, s.views.get());
        assertEquals(LAYOUT.numLayers() + 1, s.putBatches.get(), "one put per layer, then the manifests");
        assertEquals(LAYOUT.numLayers(), s.immutablePutBatches.get(), "kvc-v1 layer puts promise immutability, "
                + "manifests do not");
        assertEquals(LAYOUT.numLayers() + 1, s.getIntos.get(), "one batch read per layer, after the manifests");
    }

    @Test
    void aStoreThatAnswersReadsLaterIsSentEachNextLayerBeforeTheLayerIsChecked() {
        CountingStoreTestDouble s = roundTrip(EnumSet.of(StoreCapability.PIPELINED_READ, StoreCapability.REMOVE,
                StoreCapability.BATCH), DropMode.CONSUME);
        assertEquals(LAYOUT.numLayers() - 1, s.sentReads.get(), "every layer after the first is sent ahead");
        assertEquals(2, s.getIntos.get(), "the manifests and the first layer are read at once");
    }

    @Test
    void aLoadThatEndsOnACorruptLayerAwaitsTheLayerSentAheadAndKeepsNoStaging() {
        CountingStoreTestDouble store = store(EnumSet.of(StoreCapability.PIPELINED_READ, StoreCapability.REMOVE,
                StoreCapability.BATCH));
        store.corruptBatchRead = 2;
        DropResult r = roundTrip(store, DropMode.RETAIN);
        assertEquals(MissReason.CORRUPT, r.reason(), r.toString());
        assertEquals(1, store.sentReads.get(), "layer 1 was sent ahead of layer 0's check, and nothing after");
    }

    @Test
    void aLayerSentAheadThatFailsFailsTheDropSelectWithTheStoresError() {
        CountingStoreTestDouble store = store(EnumSet.of(StoreCapability.PIPELINED_READ, StoreCapability.REMOVE,
                StoreCapability.BATCH));
        store.awaitFailure = KVException.of(ErrorCode.STORE_UNREACHABLE, "closed the connection mid-reply")
                .store(store.uri()).operation("getIntoBatch").build();
        KVException e = assertThrows(KVException.class, () -> roundTrip(store, DropMode.RETAIN));
        assertEquals(ErrorCode.STORE_UNREACHABLE, e.code());
        assertTrue(e.getMessage().contains("mid-reply"), e.getMessage());
    }

    @Test
    void aStoreWithoutRemoveIsNeverAskedToRemove() {
        CountingStoreTestDouble s = roundTrip(EnumSet.of(StoreCapability.BATCH, StoreCapability.LOCAL_MEMORY),
                DropMode.CONSUME);
        assertEquals(0, s.removes.get(), "a store without REMOVE was asked to remove");
    }

    private static int[] range(int from, int to) {
        int[] r = new int[to - from];
        for (int i = 0; i < r.length; i++) {
            r[i] = from + i;
        }
        return r;
    }
}
