package dev.kvconnector.store.tiered;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropMode;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropTarget;
import dev.kvconnector.connector.InsertSession;
import dev.kvconnector.connector.KVStoreConnector;
import dev.kvconnector.connector.LayerSource;
import dev.kvconnector.connector.StoreConnector;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreUri;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.store.memory.MemoryStore;
import dev.kvconnector.store.shm.ShmStore;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A connector over a tiered store (issue 21): a consuming drop-select empties every tier, one whose remote tier is
 * down is served by the local tier, consume mode over tiers that cannot remove is refused when the connector is
 * built, and an {@code shm:} first tier's claims and views pass through.
 */
class TieredConnectorTest {
    private static final KVLayout LAYOUT = KVLayout.preset("qwen2.5-0.5b");
    private static final int TOKENS = 40;
    private static final BlockTable TABLE = new BlockTable(new int[] {0, 1, 2}, 16, TOKENS);

    @TempDir
    Path dir;

    private static RequestTokens prompt(int seed) {
        return RequestTokens.of(IntStream.range(0, TOKENS).map(i -> seed + i).toArray());
    }

    private static void fill(PagedKVCache cache) {
        try (Arena arena = Arena.ofConfined()) {
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    MemorySegment tensor = cache.tensor(l, t);
                    tensor.copyFrom(Segments.random(arena, tensor.byteSize(), 100 * l + t));
                }
            }
        }
    }

    private static DropResult insertThenConsume(StoreConnector kv, int seed) {
        try (PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 3)) {
            try (InsertSession s = kv.beginInsert(prompt(seed))) {
                s.putLayers(LayerSource.paged(source, TABLE));
                s.commit();
            }
            return kv.dropSelect(prompt(seed), DropTarget.paged(target, TABLE), DropMode.CONSUME);
        }
    }

    @Test
    void aConsumingDropSelectLeavesEveryTierEmptyWrittenThroughOrBack() throws Exception {
        for (TieredOptions options : List.of(TieredOptions.DEFAULT, TieredOptions.DEFAULT.withWriteBack(true))) {
            MemoryStore local = MemoryStore.withCapacity(64 << 20);
            MemoryStore remote = MemoryStore.withCapacity(64 << 20);
            try (TieredStore store = TieredStore.over(List.of(local, remote), options);
                 StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16).build()) {
                DropResult r = insertThenConsume(kv, 3);
                assertTrue(store.flush(10_000));

                assertTrue(r.isComplete(), r.toString());
                assertEquals(0, local.count(), "the first tier kept consumed objects (" + options + ")");
                assertEquals(0, remote.count(), "the second tier kept consumed objects (" + options + ")");
            }
        }
    }

    @Test
    void aDropSelectWhileTheRemoteTierIsDownIsServedFromTheLocalTierAndItsRemovalIsRetried() throws Exception {
        List<String> reported = new CopyOnWriteArrayList<>();
        MemoryStore local = MemoryStore.withCapacity(64 << 20);
        MemoryStore below = MemoryStore.withCapacity(64 << 20);
        FaultyTier remote = new FaultyTier(below);
        try (TieredStore store = TieredStore.over(List.of(local, remote), TieredOptions.DEFAULT);
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16)
                     .errorHandler((where, f) -> reported.add("connector: " + where)).build();
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 3)) {
            store.errorHandler((where, f) -> reported.add(where + ": " + f.getMessage()));
            try (InsertSession s = kv.beginInsert(prompt(4))) {
                s.putLayers(LayerSource.paged(source, TABLE));
                s.commit();
            }
            remote.down(true);

            DropResult r = kv.dropSelect(prompt(4), DropTarget.paged(target, TABLE), DropMode.CONSUME);

            assertTrue(r.isComplete(), "the local tier could serve it: " + r);
            assertEquals(0, local.count());
            assertTrue(below.count() > 0, "the remote removed while down");
            // The consumed objects leave the remote from the write-back queue, which reports each one's failure.
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (reported.isEmpty() && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertTrue(!reported.isEmpty(), "the failed removals were not reported");
            for (String report : reported) {
                assertTrue(report.contains("tier 2 (faulty:memory:") && report.contains("retrying")
                        && !report.startsWith("connector: "), report);
            }
            remote.down(false);
            assertTrue(store.flush(10_000), store.writeBackStats().toString());
            assertEquals(0, below.count(), "the retried removal left objects in the remote");
        }
    }

    @Test
    void aRequestOnlyTheRemoteTierHoldsIsReadByBatchOnceAViewTurnsOutToBeACopy() {
        // Views of what only a lower tier holds are pooled copies, one read of that tier per object; after the first
        // such view the connector reads each layer with one batch, as it would from the remote tier alone.
        MemoryStore local = MemoryStore.withCapacity(64 << 20);
        FaultyTier remote = new FaultyTier(MemoryStore.withCapacity(64 << 20));
        try (TieredStore store = TieredStore.over(List.of(local, remote), TieredOptions.DEFAULT
                .withPromoteOnHit(false));
             StoreConnector writer = KVStoreConnector.builder(remote.inner(), LAYOUT).chunkTokens(16).build();
             StoreConnector kv = KVStoreConnector.builder(store, LAYOUT).chunkTokens(16).build();
             PagedKVCache source = PagedKVCache.allocate(LAYOUT, 3);
             PagedKVCache target = PagedKVCache.allocate(LAYOUT, 3)) {
            fill(source);
            try (InsertSession s = writer.beginInsert(prompt(5))) {
                s.putLayers(LayerSource.paged(source, TABLE));
                s.commit();
            }
            int chunks = (TOKENS + 15) / 16;

            DropResult r = kv.dropSelect(prompt(5), DropTarget.paged(target, TABLE), DropMode.RETAIN);

            assertTrue(r.isComplete(), r.toString());
            assertEquals(chunks, remote.reads.get(), "only the first layer's objects are read one by one");
            assertTrue(remote.batchReads.get() >= LAYOUT.numLayers() - 1, "the other layers are read by batch: "
                    + remote.batchReads.get() + " batches");
            for (int l = 0; l < LAYOUT.numLayers(); l++) {
                for (int t = 0; t < LAYOUT.tensorsPerLayer(); t++) {
                    long bytes = (long) TOKENS * LAYOUT.bytesPerTokenPerTensor();
                    assertTrue(Segments.equal(source.tensor(l, t), target.tensor(l, t), bytes), "layer " + l);
                }
            }
        }
    }

    @Test
    void consumeModeOverTiersNoneOfWhichCanRemoveIsRefusedWhenTheConnectorIsBuilt() {
        for (boolean back : new boolean[] {false, true}) {
            try (TieredStore store = TieredStore.over(List.of(new FaultyTier(MemoryStore.withCapacity(1 << 20),
                    false), new FaultyTier(MemoryStore.withCapacity(1 << 20), false)),
                    TieredOptions.DEFAULT.withWriteBack(back))) {
                KVException e = assertThrows(KVException.class, () -> KVStoreConnector.builder(store, LAYOUT)
                        .dropMode(DropMode.CONSUME).build().close());

                assertEquals(ErrorCode.INVALID_CONFIG, e.code());
                assertTrue(e.getMessage().contains("consume mode over a write-" + (back ? "back" : "through"))
                        && e.getMessage().contains("tier 1 (faulty:memory:") && e.getMessage().contains(
                        "tier 2 (faulty:memory:"), e.getMessage());
                assertTrue(e.hint().contains("DropMode.RETAIN"), e.hint());
                KVStoreConnector.builder(store, LAYOUT).dropMode(DropMode.RETAIN).build().close();
            }
        }
    }

    @Test
    void claimsAndViewsOfAnShmFirstTierPassThroughInPlace() {
        ShmStore shm = ShmStore.open(StoreUri.parse("shm:/first?capacity=8MiB&dir=" + dir));
        try (TieredStore store = TieredStore.over(List.of(shm, MemoryStore.withCapacity(8 << 20)),
                TieredOptions.DEFAULT);
             Arena arena = Arena.ofConfined()) {
            assertTrue(store.capabilities().containsAll(List.of(StoreCapability.CLAIM, StoreCapability.VIEW)));
            MemorySegment v = Segments.random(arena, 5000, 1);
            StoreClaim claim = store.newClaim();
            assertEquals(ClaimResult.CLAIMED, store.tryClaim("c", 5000, PutOptions.DEFAULT, claim));
            long claimed = claim.segment().address();
            claim.segment().copyFrom(v);
            assertTrue(claim.commit());

            StoreView mine = store.newView();
            StoreView theirs = shm.newView();
            assertEquals(5000, store.tryView("c", mine));
            assertEquals(5000, shm.tryView("c", theirs));
            assertEquals(theirs.segment().address(), mine.segment().address(), "the view is not shm's mapping");
            assertEquals(claimed, mine.segment().address(), "the claim was not shm's memory, written in place");
            assertTrue(Segments.equal(v, mine.segment(), 5000));
            mine.release();
            theirs.release();
        }
    }

    @Test
    void aTieredUriWithABracketedIpv6TierParsesAndTwoMemoryTiersAreTwoStores() throws Exception {
        StoreUri u = StoreUri.parse("tiered:[shm:/x][valkey://[::1]:6379]?write=back");
        assertEquals(List.of("shm:/x", "valkey://[::1]:6379"), u.nested());
        StoreUri tier = StoreUri.parse(u.nested().get(1));
        assertEquals("::1", tier.hosts().get(0).host());
        assertEquals(6379, tier.hosts().get(0).port());
        assertEquals("back", u.params().get("write"));

        try (var store = KVStores.open("tiered:[memory:][memory:?capacity=1MiB]")) {
            assertTrue(store.uri().startsWith("tiered:"), store.uri());
        }
        Path sub = java.nio.file.Files.createDirectory(dir.resolve("sub"));
        try (var store = KVStores.open("tiered:[shm:/same?capacity=1MiB&dir=" + dir + "][shm:/same?capacity=1MiB&dir="
                + sub + "]")) {
            assertTrue(store.uri().startsWith("tiered:"), "shm tiers in two directories are two stores");
        }
    }
}
