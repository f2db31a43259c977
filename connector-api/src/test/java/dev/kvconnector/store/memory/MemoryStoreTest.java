package dev.kvconnector.store.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.testkit.Segments;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class MemoryStoreTest {

    @Test
    void capacityIsAHardBoundKeptByEvictingTheLeastRecentlyUsed() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = (MemoryStore) KVStores.open("memory:?capacity=3000")) {
            MemorySegment v = Segments.random(a, 1000, 1);
            s.put("a", v, PutOptions.DEFAULT);
            s.put("b", v, PutOptions.DEFAULT);
            s.put("c", v, PutOptions.DEFAULT);
            assertEquals(1000, s.getInto("a", a.allocate(1000)));
            s.put("d", v, PutOptions.DEFAULT);
            assertTrue(s.exists("a"), "a was used most recently but got evicted");
            assertFalse(s.exists("b"), "b was least recently used and should have gone");
            assertTrue(s.usedBytes() <= 3000);
            assertEquals(3, s.count());
        }
    }

    @Test
    void refusePolicyFailsWithStoreFullAndKeepsEveryEntry() {
        try (Arena a = Arena.ofConfined();
             MemoryStore s = (MemoryStore) KVStores.open("memory:?capacity=2000&eviction=refuse")) {
            MemorySegment v = Segments.random(a, 1000, 2);
            s.put("a", v, PutOptions.DEFAULT);
            s.put("b", v, PutOptions.DEFAULT);
            KVException e = assertThrows(KVException.class, () -> s.put("c", v, PutOptions.DEFAULT));
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertTrue(e.getMessage().contains("2000"), e.getMessage());
            assertTrue(s.exists("a") && s.exists("b"));
            assertFalse(s.exists("c"));
        }
    }

    @Test
    void valueLargerThanCapacityIsRefusedUpFront() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(100)) {
            KVException e = assertThrows(KVException.class, () -> s.put("k", a.allocate(101), PutOptions.DEFAULT));
            assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
            assertEquals(0, s.usedBytes());
        }
    }

    @Test
    void defaultTtlFromTheUriApplies() throws InterruptedException {
        try (Arena a = Arena.ofConfined(); MemoryStore s = (MemoryStore) KVStores.open("memory:?ttl=50ms")) {
            s.put("k", a.allocate(8), PutOptions.DEFAULT);
            Thread.sleep(120);
            assertTrue(GetResult.isMiss(s.getInto("k", a.allocate(8))));
            assertEquals(0, s.usedBytes(), "expired entry still holds memory");
        }
    }

    @Test
    void removalDuringARead() throws Exception {
        try (Arena a = Arena.ofShared(); MemoryStore s = MemoryStore.withCapacity(1L << 30)) {
            long size = 32L << 20;
            MemorySegment v = Segments.random(a, size, 3);
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                for (int round = 0; round < 5; round++) {
                    s.put("k", v, PutOptions.DEFAULT);
                    CountDownLatch go = new CountDownLatch(1);
                    Future<Long> reader = pool.submit(() -> {
                        MemorySegment dst = a.allocate(size);
                        go.countDown();
                        long r = s.getInto("k", dst);
                        if (GetResult.isHit(r)) {
                            assertTrue(Segments.equal(v, dst, size), "a read raced with removal and saw freed memory");
                        }
                        return r;
                    });
                    go.await();
                    s.remove("k");
                    reader.get();
                }
            } finally {
                pool.shutdownNow();
            }
            assertEquals(0, s.usedBytes());
        }
    }

    @Test
    void largeBlocksAreReusedInsteadOfFaultingInFreshMemoryAndFreedOnClose() {
        long before = dev.kvconnector.memory.NativeMemory.liveBlocks();
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(64L << 20)) {
            MemorySegment v = Segments.random(a, (1 << 20) + 100, 7);
            s.put("k", v, PutOptions.DEFAULT);
            long oneBlock = dev.kvconnector.memory.NativeMemory.liveBlocks();
            assertEquals(before + 1, oneBlock);
            for (int i = 0; i < 20; i++) {
                s.remove("k");
                s.put("k", v, PutOptions.DEFAULT);
                s.put("k2", v, PutOptions.DEFAULT);
                s.remove("k2");
            }
            assertEquals(before + 2, dev.kvconnector.memory.NativeMemory.liveBlocks(), "blocks were not reused");
            MemorySegment dst = a.allocate(v.byteSize());
            assertEquals(v.byteSize(), s.getInto("k", dst));
            assertTrue(Segments.equal(v, dst, v.byteSize()));
            assertTrue(s.usedBytes() >= v.byteSize() && s.usedBytes() <= v.byteSize() * 5 / 4, "size class slack");
        }
        assertEquals(before, dev.kvconnector.memory.NativeMemory.liveBlocks());
    }

    @Test
    void keptBlocksNeverPushThePoolPastItsCapacity() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(4L << 20)) {
            for (int i = 0; i < 40; i++) {
                long size = (64 << 10) + i * 37_000L;
                s.put("k" + i, Segments.random(a, size, i), PutOptions.DEFAULT);
                if (i % 3 == 0) {
                    s.remove("k" + (i / 2));
                }
                long kept = dev.kvconnector.memory.NativeMemory.liveBytes();
                assertTrue(s.usedBytes() <= s.capacity(), "used " + s.usedBytes());
                assertTrue(kept <= s.capacity() + (1 << 20), "native bytes " + kept + " outgrew the capacity");
            }
        }
    }

    @Test
    void unknownOptionsAndHostsAreRejectedWithTheOptionNamed() {
        KVException e = assertThrows(KVException.class, () -> KVStores.open("memory:?capacty=1GiB"));
        assertEquals(ErrorCode.INVALID_URI, e.code());
        assertTrue(e.getMessage().contains("capacty"), e.getMessage());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("memory://host:1")).code());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("memory:?eviction=random")).code());
        assertEquals(ErrorCode.INVALID_URI, assertThrows(KVException.class,
                () -> KVStores.open("memory:?capacity=lots")).code());
        KVException creds = assertThrows(KVException.class, () -> KVStores.open("memory://u:S3CRET@"));
        assertEquals(ErrorCode.INVALID_URI, creds.code());
        assertTrue(!creds.getMessage().contains("S3CRET") && creds.getMessage().contains("no user name"),
                creds.getMessage());
    }

    @Test
    void openClaimsCountAgainstTheCapacityAndAFullStoreReturnsFullNotAnException() {
        try (MemoryStore s = (MemoryStore) KVStores.open("memory:?capacity=3000&eviction=refuse")) {
            StoreClaim a = s.newClaim();
            StoreClaim b = s.newClaim();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim("a", 2000, PutOptions.DEFAULT, a));
            assertEquals(2000, s.usedBytes(), "an open claim must be counted");
            assertEquals(ClaimResult.FULL, s.tryClaim("b", 2000, PutOptions.DEFAULT, b));
            assertFalse(b.isClaimed());
            assertEquals(2000, s.usedBytes(), "a refused claim reserved bytes");
            a.abort();
            assertEquals(0, s.usedBytes(), "an aborted claim kept its bytes");
            assertEquals(ClaimResult.CLAIMED, s.tryClaim("b", 2000, PutOptions.DEFAULT, b));
            assertTrue(b.commit());
            assertEquals(2000, s.usedBytes());
            assertEquals(1, s.count());
            KVException tooLarge = assertThrows(KVException.class, () -> s.tryClaim("c", 3001, PutOptions.DEFAULT, a));
            assertEquals(ErrorCode.VALUE_TOO_LARGE, tooLarge.code());
        }
    }

    @Test
    void lruEvictionWhileAViewIsHeldTakesTheKeyButFreesTheBytesOnlyOnRelease() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = (MemoryStore) KVStores.open("memory:?capacity=3000")) {
            MemorySegment v = Segments.random(a, 1000, 11);
            s.put("a", v, PutOptions.DEFAULT);
            StoreView view = s.newView();
            assertEquals(1000, s.tryView("a", view));
            s.put("b", Segments.random(a, 1000, 12), PutOptions.DEFAULT);
            s.put("c", Segments.random(a, 1000, 13), PutOptions.DEFAULT);
            s.put("d", Segments.random(a, 1000, 14), PutOptions.DEFAULT);
            assertFalse(s.exists("a"), "a was least recently used and should have been evicted");
            assertEquals(3000, s.usedBytes(), "the viewed bytes must stay counted until the release");
            assertEquals(2, s.count());
            assertTrue(Segments.equal(v, view.segment(), 1000), "the evicted entry's bytes changed under the view");
            view.release();
            assertEquals(2000, s.usedBytes(), "the release must free the evicted entry");
        }
    }

    @Test
    void refuseModeWithAViewOfARemovedKeyRefusesUntilTheRelease() {
        try (Arena a = Arena.ofConfined();
             MemoryStore s = (MemoryStore) KVStores.open("memory:?capacity=2000&eviction=refuse")) {
            MemorySegment v = Segments.random(a, 1000, 15);
            s.put("a", v, PutOptions.DEFAULT);
            s.put("b", v, PutOptions.DEFAULT);
            StoreView view = s.newView();
            assertEquals(1000, s.tryView("a", view));
            assertTrue(s.remove("a"));
            assertEquals(ErrorCode.STORE_FULL,
                    assertThrows(KVException.class, () -> s.put("c", v, PutOptions.DEFAULT)).code());
            StoreClaim claim = s.newClaim();
            assertEquals(ClaimResult.FULL, s.tryClaim("c", 1000, PutOptions.DEFAULT, claim));
            assertTrue(Segments.equal(v, view.segment(), 1000));
            view.release();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim("c", 1000, PutOptions.DEFAULT, claim));
            assertTrue(claim.commit());
            assertEquals(2, s.count());
        }
    }

    @Test
    void commitReplacesTheOldValueAndFreesItAfterItsLastView() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(1L << 20)) {
            MemorySegment old = Segments.random(a, 100_000, 16);
            s.put("k", old, PutOptions.DEFAULT);
            StoreView view = s.newView();
            assertEquals(100_000, s.tryView("k", view));
            StoreClaim claim = s.newClaim();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim("k", 50_000, PutOptions.DEFAULT, claim));
            claim.segment().fill((byte) 9);
            assertTrue(claim.commit());
            assertEquals(50_000, s.size("k"));
            assertTrue(Segments.equal(old, view.segment(), 100_000));
            long withView = s.usedBytes();
            view.release();
            assertTrue(s.usedBytes() < withView, "the replaced value was not freed on its last release");
        }
    }

    @Test
    void ifAbsentClaimLosesToAPutBetweenClaimAndCommit() {
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(1L << 20)) {
            StoreClaim claim = s.newClaim();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim("k", 100, PutOptions.DEFAULT.withIfAbsent(true), claim));
            MemorySegment winner = Segments.random(a, 100, 17);
            s.put("k", winner, PutOptions.DEFAULT);
            claim.segment().fill((byte) 1);
            assertFalse(claim.commit(), "the if-absent commit must lose to the earlier put");
            MemorySegment dst = a.allocate(100);
            assertEquals(100, s.getInto("k", dst));
            assertTrue(Segments.equal(winner, dst, 100));
            assertEquals(100, s.usedBytes(), "the losing claim's bytes were not returned");
        }
    }

    @Test
    void handlesOfAnotherStoreAreRefused() {
        try (MemoryStore s = MemoryStore.withCapacity(1L << 20); MemoryStore t = MemoryStore.withCapacity(1L << 20)) {
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                    () -> s.tryClaim("k", 10, PutOptions.DEFAULT, t.newClaim())).code());
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                    () -> s.tryView("k", t.newView())).code());
        }
    }

    @Test
    void aSteadyStreamOfSameSizedClaimsViewsAndPutsUnderNewKeysAllocatesNothing() {
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        String[] keys = new String[128];
        for (int k = 0; k < keys.length; k++) {
            keys[k] = "key-" + k;
        }
        try (MemoryStore store = MemoryStore.withCapacity(16L << 20); Arena arena = Arena.ofConfined()) {
            MemorySegment value = Segments.random(arena, 1 << 20, 21);
            StoreClaim claim = store.newClaim();
            StoreView view = store.newView();
            long best = Long.MAX_VALUE;
            int cycles = 2_000;
            for (int round = 0; round < 20; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < cycles; i++) {
                    // Keys the index has not held since their last removal: each put indexes a key anew.
                    String claimed = keys[(2 * i) % keys.length];
                    String put = keys[(2 * i + 1) % keys.length];
                    assertEquals(ClaimResult.CLAIMED, store.tryClaim(claimed, value.byteSize(), PutOptions.DEFAULT,
                            claim));
                    MemorySegment.copy(value, 0, claim.segment(), 0, 4096);
                    assertTrue(claim.commit());
                    assertEquals(value.byteSize(), store.tryView(claimed, view));
                    view.release();
                    assertTrue(store.put(put, value, PutOptions.DEFAULT));
                    assertTrue(store.remove(claimed) && store.remove(put));
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            // LinkedHashMap made a node per stored value (about 40 bytes); the LruIndex makes none.
            assertTrue(best < cycles, cycles + " cycles of two stored values allocated " + best + " bytes");
            assertEquals(0, store.count());
        }
    }

    @Test
    void aSteadyStreamOfStoreKeyCallsUnderNewKeysAllocatesNothing() {
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        StoreKey claimed = new StoreKey();
        StoreKey put = new StoreKey();
        StoreKey[] batch = {new StoreKey(), new StoreKey()};
        StoreKey[] all = {claimed, put, batch[0], batch[1]};
        try (MemoryStore store = MemoryStore.withCapacity(16L << 20); Arena arena = Arena.ofConfined()) {
            // The smallest size whose blocks the store keeps for reuse: what a put of a new size allocates is its own.
            MemorySegment value = Segments.random(arena, 64 << 10, 22);
            long size = value.byteSize();
            MemorySegment dst = arena.allocate(size);
            MemorySegment[] values = {value, value};
            MemorySegment[] dsts = {dst, arena.allocate(size)};
            boolean[] stored = new boolean[2];
            long[] results = new long[2];
            StoreClaim claim = store.newClaim();
            StoreView view = store.newView();
            long best = Long.MAX_VALUE;
            int cycles = 1_000;
            int request = 0;
            for (int round = 0; round < 10; round++) {
                long before = mx.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < cycles; i++) {
                    // Keys the store has never seen, refilled in place: each cycle is a request of new content.
                    request++;
                    claimed.clear().append("kvc1:{").append(request).append("}:claimed");
                    put.clear().append("kvc1:{").append(request).append("}:put");
                    for (int b = 0; b < batch.length; b++) {
                        batch[b].clear().append("kvc1:{").append(request).append("}:L").append(b);
                    }
                    assertEquals(ClaimResult.CLAIMED, store.tryClaim(claimed, size, PutOptions.DEFAULT, claim));
                    MemorySegment.copy(value, 0, claim.segment(), 0, 4096);
                    assertTrue(claim.commit());
                    assertEquals(size, store.tryView(claimed, view));
                    view.release();
                    assertTrue(store.put(put, value, PutOptions.DEFAULT));
                    assertEquals(size, store.getInto(put, dst));
                    store.putBatch(batch, values, batch.length, PutOptions.DEFAULT, stored);
                    store.getIntoBatch(batch, dsts, batch.length, results);
                    assertTrue(stored[0] && stored[1] && results[0] == size && results[1] == size);
                    assertEquals(all.length, store.removeConsumed(all, all.length));
                }
                best = Math.min(best, mx.getCurrentThreadAllocatedBytes() - before);
            }
            // A call that took the String default would make a string (and an array for a batch) per call.
            assertEquals(0, best, cycles + " requests under StoreKeys allocated " + best + " bytes");
            assertEquals(0, store.count());
        }
    }

    @Test
    void aStringKeyAndItsStoreKeyNameTheSameObject() {
        String[] texts = {"kvc1:{ab12}:L3", "h\u00e9llo-\u043a\u043b\u044e\u0447-\u9375-\ud83d\udd11", "a\u0000b"};
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(1L << 20)) {
            StoreClaim claim = s.newClaim();
            StoreView view = s.newView();
            MemorySegment dst = a.allocate(1000);
            for (int i = 0; i < texts.length; i++) {
                String text = texts[i];
                MemorySegment v = Segments.random(a, 100 + i, 30 + i);
                long size = v.byteSize();
                s.put(text, v, PutOptions.DEFAULT);
                StoreKey key = StoreKey.of(text);
                assertEquals(size, s.getInto(key, dst), text);
                assertTrue(Segments.equal(v, dst, size));
                assertFalse(s.put(key, v, PutOptions.DEFAULT.withIfAbsent(true)), "the StoreKey missed " + text);
                assertEquals(1, s.removeConsumed(new StoreKey[] {key}, 1));
                assertFalse(s.exists(text));

                assertTrue(s.put(key, v, PutOptions.DEFAULT));
                key.set("refilled after the put");
                assertEquals(size, s.size(text), "the store kept the caller's key, not a copy: " + text);
                assertEquals(size, s.getInto(text, dst));
                assertFalse(s.exists("refilled after the put"));
                assertTrue(s.remove(text));

                assertEquals(ClaimResult.CLAIMED, s.tryClaim(key.set(text), size, PutOptions.DEFAULT, claim));
                key.set("refilled before the commit");
                MemorySegment.copy(v, 0, claim.segment(), 0, size);
                assertTrue(claim.commit());
                assertEquals(size, s.getInto(text, dst), "the claim committed under the wrong key: " + text);
                assertTrue(Segments.equal(v, dst, size));
                assertFalse(s.exists("refilled before the commit"));
                assertEquals(size, s.tryView(StoreKey.of(text), view));
                assertTrue(Segments.equal(v, view.segment(), size));
                view.release();
            }
            assertEquals(texts.length, s.count());
            long[] results = new long[texts.length];
            StoreKey[] keys = new StoreKey[texts.length];
            MemorySegment[] dsts = new MemorySegment[texts.length];
            for (int i = 0; i < texts.length; i++) {
                keys[i] = StoreKey.of(texts[i]);
                dsts[i] = a.allocate(1000);
            }
            s.getIntoBatch(keys, dsts, texts.length, results);
            for (int i = 0; i < texts.length; i++) {
                assertEquals(100 + i, results[i], texts[i]);
            }
        }
    }

    @Test
    void errorsUnderAStoreKeyNameTheKeyAsText() {
        String text = "kvc1:{\u00e9}:L0";
        try (Arena a = Arena.ofConfined(); MemoryStore s = MemoryStore.withCapacity(100)) {
            KVException tooLarge = assertThrows(KVException.class,
                    () -> s.put(StoreKey.of(text), a.allocate(101), PutOptions.DEFAULT));
            assertEquals(ErrorCode.VALUE_TOO_LARGE, tooLarge.code());
            assertEquals(text, tooLarge.key());
            StoreClaim claim = s.newClaim();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim(StoreKey.of(text), 10, PutOptions.DEFAULT, claim));
            KVException held = assertThrows(KVException.class,
                    () -> s.tryClaim(StoreKey.of("other"), 10, PutOptions.DEFAULT, claim));
            assertEquals("other", held.key());
            assertTrue(held.getMessage().contains(text), held.getMessage());
            s.close();
            KVException closed = assertThrows(KVException.class,
                    () -> s.put(StoreKey.of(text), a.allocate(10), PutOptions.DEFAULT));
            assertEquals(ErrorCode.CLOSED, closed.code());
            assertEquals(text, closed.key());
        }
    }
}
