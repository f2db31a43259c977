package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.Pin;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The mooncake:// store through the KVStore SPI, against the test double or a real store. */
class MooncakeStoreTest {
    private static final long LEASE_MS = Long.parseLong(System.getenv().getOrDefault("MOONCAKE_DOUBLE_LEASE_MS", "10000"));

    private MooncakeTestTarget target;
    private MooncakeStore store;
    private Arena arena;
    private String prefix;

    @BeforeEach
    void setUp() {
        target = MooncakeTestTarget.require();
        store = target.open("");
        arena = Arena.ofConfined();
        prefix = MooncakeTestTarget.uniquePrefix();
    }

    @AfterEach
    void tearDown() {
        if (store != null) {
            try {
                assertEquals(store.config().stagingSlots(), store.freeStagingSlots(), "a staging slot leaked");
                store.removeMatching("^" + prefix);
            } finally {
                store.close();
            }
            assertEquals(0, store.callerRegistrations(), "a registration outlived close");
        }
        if (arena != null) {
            arena.close();
        }
    }

    private MemorySegment pattern(int n, int seed) {
        MemorySegment s = arena.allocate(n);
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed * 7 + i * 13));
        }
        return s;
    }

    private static void assertPattern(MemorySegment s, int n, int seed) {
        for (int i = 0; i < n; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed * 7 + i * 13)) {
                throw new AssertionError("byte " + i + " differs (seed " + seed + ")");
            }
        }
    }

    private MooncakeStore openWith(String extra) {
        return target.open(extra);
    }

    @Test
    void declaresRegisteredMemoryBatchSharingRemoveAndImmutable() {
        assertEquals(java.util.EnumSet.of(StoreCapability.REGISTERED_MEMORY, StoreCapability.BATCH,
                StoreCapability.SHARED_ACROSS_PROCESSES, StoreCapability.REMOVE, StoreCapability.IMMUTABLE),
                store.capabilities());
        assertTrue(store.uri().startsWith("mooncake://"));
        assertNotNull(store.clientHostname());
    }

    @Test
    void putThenGetIntoRoundTripsUnregisteredMemoryThroughStaging() {
        assertTrue(store.put(prefix + "a", pattern(10_000, 1), PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(20_000);
        long r = store.getInto(prefix + "a", dst);
        assertEquals(10_000, r);
        assertPattern(dst, 10_000, 1);
        assertEquals(10_000, store.size(prefix + "a"));
        assertTrue(store.exists(prefix + "a"));
    }

    @Test
    void heapSegmentsWorkThroughStaging() {
        byte[] value = {1, 2, 3, 4, 5};
        assertTrue(store.put(prefix + "heap", MemorySegment.ofArray(value), PutOptions.DEFAULT));
        byte[] out = new byte[8];
        assertEquals(5, store.getInto(prefix + "heap", MemorySegment.ofArray(out)));
        assertArrayEquals(new byte[] {1, 2, 3, 4, 5, 0, 0, 0}, out);
    }

    @Test
    void registeredMemoryMovesWithoutStagingEvenBeyondASlot() {
        long slot = store.config().stagingSlotBytes();
        int n = (int) (slot * 2);
        MemorySegment region = arena.allocate(n * 2L, 4096);
        store.register(region);
        try {
            MemorySegment src = region.asSlice(0, n);
            for (int i = 0; i < n; i += 4096) {
                src.set(ValueLayout.JAVA_BYTE, i, (byte) (i >>> 12));
            }
            assertTrue(store.put(prefix + "big", src, PutOptions.DEFAULT));
            MemorySegment dst = region.asSlice(n, n);
            assertEquals(n, store.getInto(prefix + "big", dst));
            for (int i = 0; i < n; i += 4096) {
                assertEquals((byte) (i >>> 12), dst.get(ValueLayout.JAVA_BYTE, i));
            }
        } finally {
            store.unregister(region);
        }
    }

    @Test
    void unregisteredNativeValuesLargerThanASlotGoThroughTheLocalBuffer() {
        int n = (int) store.config().stagingSlotBytes() * 3;
        assertTrue(store.put(prefix + "big", pattern(n, 4), PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(n);
        assertEquals(n, store.getInto(prefix + "big", dst));
        assertPattern(dst, n, 4);
        store.register(dst);
        store.unregister(dst);
    }

    @Test
    void heapValuesLargerThanASlotAreTooLargeAndNothingIsRemoved() {
        assertTrue(store.put(prefix + "x", pattern(10, 1), PutOptions.DEFAULT));
        int n = (int) store.config().stagingSlotBytes() + 1;
        KVException e = assertThrows(KVException.class,
                () -> store.put(prefix + "x", MemorySegment.ofArray(new byte[n]), PutOptions.DEFAULT));
        assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
        assertTrue(e.hint().contains("register"), e.hint());
        assertEquals(10, store.size(prefix + "x"));
    }

    @Test
    void valuesBeyondTheLocalBufferNeedRegisteredMemory() {
        try (MooncakeStore tight = target.open(storeMaster(), "&buffer=2MiB")) {
            int n = 3 << 20;
            MemorySegment v = arena.allocate(n);
            assertEquals(ErrorCode.VALUE_TOO_LARGE, assertThrows(KVException.class,
                    () -> tight.put(prefix + "v", v, PutOptions.DEFAULT)).code());
            tight.register(v);
            assertTrue(tight.put(prefix + "v", v, PutOptions.DEFAULT));
            tight.unregister(v);
        }
    }

    @Test
    void gettingAnObjectLargerThanASlotIntoHeapMemoryIsTooLarge() {
        int n = (int) store.config().stagingSlotBytes() * 2;
        assertTrue(store.put(prefix + "big", pattern(n, 2), PutOptions.DEFAULT));
        KVException e = assertThrows(KVException.class,
                () -> store.getInto(prefix + "big", MemorySegment.ofArray(new byte[n])));
        assertEquals(ErrorCode.VALUE_TOO_LARGE, e.code());
        assertTrue(GetResult.isTooSmall(store.getInto(prefix + "big", arena.allocate(16))));
    }

    @Test
    void emptyValuesRoundTripAndARealOneByteValueLaterIsNotMistakenForEmpty() {
        assertTrue(store.put(prefix + "e", arena.allocate(0), PutOptions.DEFAULT));
        assertEquals(0, store.size(prefix + "e"));
        assertTrue(store.exists(prefix + "e"));
        assertEquals(0, store.getInto(prefix + "e", arena.allocate(0)));
        assertEquals(0, store.getInto(prefix + "e", arena.allocate(8)));
        MemorySegment one = pattern(1, 3);
        assertTrue(store.put(prefix + "e", one, PutOptions.DEFAULT));
        assertEquals(1, store.size(prefix + "e"));
        MemorySegment dst = arena.allocate(4);
        assertEquals(1, store.getInto(prefix + "e", dst));
        assertPattern(dst, 1, 3);
        assertTrue(store.put(prefix + "e", arena.allocate(0), PutOptions.DEFAULT));
        long[] results = new long[1];
        store.getIntoBatch(new String[] {prefix + "e"}, new MemorySegment[] {arena.allocate(4)}, 1, results);
        assertEquals(0, results[0]);
    }

    @Test
    void putReplacesTheOldValueAlthoughTheAbiKeepsIt() {
        assertTrue(store.put(prefix + "k", pattern(100, 1), PutOptions.DEFAULT));
        assertTrue(store.put(prefix + "k", pattern(200, 2), PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(300);
        assertEquals(200, store.getInto(prefix + "k", dst));
        assertPattern(dst, 200, 2);
    }

    @Test
    void ifAbsentStoresOnlyTheFirstValue() {
        PutOptions ifAbsent = PutOptions.DEFAULT.withIfAbsent(true);
        assertTrue(store.put(prefix + "once", pattern(50, 1), ifAbsent));
        assertFalse(store.put(prefix + "once", pattern(60, 2), ifAbsent));
        MemorySegment dst = arena.allocate(100);
        assertEquals(50, store.getInto(prefix + "once", dst));
        assertPattern(dst, 50, 1);
    }

    @Test
    void getIntoReturnsTooSmallWithTheRealSizeAndCopiesNothing() {
        assertTrue(store.put(prefix + "t", pattern(1000, 3), PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(999);
        dst.fill((byte) 0x77);
        long r = store.getInto(prefix + "t", dst);
        assertTrue(GetResult.isTooSmall(r), GetResult.describe(r));
        assertEquals(1000, GetResult.requiredSize(r));
        for (int i = 0; i < 999; i++) {
            assertEquals((byte) 0x77, dst.get(ValueLayout.JAVA_BYTE, i));
        }
    }

    @Test
    void missesAreResultsNotExceptions() {
        assertTrue(GetResult.isMiss(store.getInto(prefix + "none", arena.allocate(10))));
        assertEquals(-1, store.size(prefix + "none"));
        assertFalse(store.exists(prefix + "none"));
        assertFalse(store.remove(prefix + "none"));
    }

    @Test
    void removeReportsWhetherTheKeyExisted() {
        assertTrue(store.put(prefix + "r", pattern(10, 1), PutOptions.DEFAULT));
        assertTrue(store.remove(prefix + "r"));
        assertFalse(store.remove(prefix + "r"));
        assertFalse(store.exists(prefix + "r"));
    }

    @Test
    void removingAnObjectAReaderLeasedWaitsForTheLeaseToEnd() {
        assumeTrue(target.isDouble() && LEASE_MS < 2000, "needs the double's short lease");
        assertTrue(store.put(prefix + "l", pattern(10, 1), PutOptions.DEFAULT));
        assertEquals(10, store.getInto(prefix + "l", arena.allocate(10)));
        long start = System.nanoTime();
        assertTrue(store.remove(prefix + "l"));
        long waitedMs = (System.nanoTime() - start) / 1_000_000;
        assertTrue(waitedMs >= LEASE_MS / 2, "removed after " + waitedMs + " ms, before the lease could end");
        assertFalse(store.exists(prefix + "l"));
    }

    @Test
    void leasePolicyForceRemovesALeasedObjectAtOnce() {
        try (MooncakeStore forcing = target.open(storeMaster(), "&lease-policy=force")) {
            assertTrue(forcing.put(prefix + "f", pattern(10, 1), PutOptions.DEFAULT));
            assertEquals(10, forcing.getInto(prefix + "f", arena.allocate(10)));
            assertTrue(forcing.remove(prefix + "f"));
            assertFalse(forcing.exists(prefix + "f"));
        }
    }

    @Test
    void removeConsumedRemovesWhatTheCallerJustReadPastItsOwnLease() {
        assumeTrue(LEASE_MS >= 200, "needs a lease longer than lease-wait");
        try (MooncakeStore impatient = target.open(storeMaster(), "&lease-wait=20ms")) {
            String[] keys = {prefix + "c1", prefix + "c2", prefix + "never-written"};
            for (int i = 0; i < 2; i++) {
                assertTrue(impatient.put(keys[i], pattern(10, i), PutOptions.DEFAULT));
                assertEquals(10, impatient.getInto(keys[i], arena.allocate(10)));
            }
            assertEquals(2, impatient.removeConsumed(keys, 3));
            assertFalse(impatient.exists(keys[0]));
            assertFalse(impatient.exists(keys[1]));
        }
    }

    @Test
    void immutablePutSkipsTheRemoveAndKeepsTheStoredValue() {
        PutOptions immutable = PutOptions.DEFAULT.withImmutable(true);
        assertTrue(store.put(prefix + "im", pattern(100, 1), PutOptions.DEFAULT));
        // Breaking the promise shows whether the remove ran: without it the ABI keeps the first value.
        assertTrue(store.put(prefix + "im", pattern(100, 2), immutable));
        MemorySegment dst = arena.allocate(100);
        assertEquals(100, store.getInto(prefix + "im", dst));
        assertPattern(dst, 100, 1);
        boolean[] stored = new boolean[2];
        store.putBatch(new String[] {prefix + "im", prefix + "im2"},
                new MemorySegment[] {pattern(100, 3), pattern(100, 4)}, 2, immutable, stored);
        assertTrue(stored[0] && stored[1]);
        assertEquals(100, store.getInto(prefix + "im", dst));
        assertPattern(dst, 100, 1);
        assertEquals(100, store.getInto(prefix + "im2", dst));
        assertPattern(dst, 100, 4);
    }

    @Test
    void immutablePutOfALeasedKeyNeitherWaitsNorFails() {
        assumeTrue(LEASE_MS >= 200, "needs a lease longer than lease-wait");
        try (MooncakeStore impatient = target.open(storeMaster(), "&lease-wait=20ms")) {
            assertTrue(impatient.put(prefix + "leased", pattern(10, 1), PutOptions.DEFAULT));
            assertEquals(10, impatient.getInto(prefix + "leased", arena.allocate(10)));
            long start = System.nanoTime();
            assertTrue(impatient.put(prefix + "leased", pattern(10, 1), PutOptions.DEFAULT.withImmutable(true)),
                    "an immutable put of a leased key must not remove it, so the lease cannot block it");
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms < LEASE_MS / 2, "the immutable put waited " + ms + " ms, as a remove of a leased key does");
        }
    }

    @Test
    void aLeaseThatOutlastsLeaseWaitIsBusyAndSaysWhatToDo() {
        assumeTrue(LEASE_MS >= 200, "needs a lease longer than lease-wait");
        try (MooncakeStore impatient = target.open(storeMaster(), "&lease-wait=20ms")) {
            assertTrue(impatient.put(prefix + "b", pattern(10, 1), PutOptions.DEFAULT));
            assertEquals(10, impatient.getInto(prefix + "b", arena.allocate(10)));
            KVException e = assertThrows(KVException.class, () -> impatient.remove(prefix + "b"));
            assertEquals(ErrorCode.BUSY, e.code());
            assertEquals(-706, e.nativeCode());
            assertTrue(e.hint().contains("lease-policy=force") && e.hint().contains("lease-wait"), e.hint());
            KVException onPut = assertThrows(KVException.class,
                    () -> impatient.put(prefix + "b", pattern(10, 2), PutOptions.DEFAULT));
            assertEquals(ErrorCode.BUSY, onPut.code());
        }
    }

    @Test
    void aFullPoolIsRetriedThenReportedAsStoreFull() {
        assumeTrue(target.isDouble(), "the pool size of a real master is not ours to choose");
        try (MooncakeStore small = target.open("&segment=1MiB&full-retries=2&full-backoff=1ms")) {
            int n = 300 * 1024;
            for (int i = 0; i < 3; i++) {
                assertTrue(small.put(prefix + i, pattern(n, i), PutOptions.DEFAULT));
                assertEquals(n, small.getInto(prefix + i, arena.allocate(n)));
            }
            KVException e = assertThrows(KVException.class,
                    () -> small.put(prefix + "more", pattern(n, 9), PutOptions.DEFAULT));
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertEquals(-200, e.nativeCode());
            assertTrue(e.hint().contains("pool full") && e.hint().contains("retried 2 times"), e.hint());
            assertEquals(small.config().stagingSlots(), small.freeStagingSlots());
        }
    }

    @Test
    void aRetriedPutSucceedsOnceEvictionMadeRoomAndTheLeastRecentlyUsedObjectWent() {
        assumeTrue(target.isDouble(), "the pool size of a real master is not ours to choose");
        try (MooncakeStore small = target.open("&segment=1MiB&full-backoff=1ms")) {
            int n = 300 * 1024;
            for (int i = 0; i < 3; i++) {
                assertTrue(small.put(prefix + i, pattern(n, i), PutOptions.DEFAULT));
            }
            assertTrue(small.put(prefix + "fourth", pattern(n, 4), PutOptions.DEFAULT));
            assertEquals(-1, small.size(prefix + 0), "the oldest object should have been evicted");
            assertEquals(n, small.size(prefix + "fourth"));
        }
    }

    @Test
    void hardPinnedObjectsAreNeverEvicted() {
        assumeTrue(target.isDouble(), "the pool size of a real master is not ours to choose");
        try (MooncakeStore small = target.open("&segment=1MiB&full-retries=1&full-backoff=1ms")) {
            int n = 300 * 1024;
            PutOptions hard = PutOptions.DEFAULT.withPin(Pin.HARD);
            for (int i = 0; i < 3; i++) {
                assertTrue(small.put(prefix + i, pattern(n, i), hard));
            }
            assertEquals(ErrorCode.STORE_FULL, assertThrows(KVException.class,
                    () -> small.put(prefix + "x", pattern(n, 9), PutOptions.DEFAULT)).code());
            for (int i = 0; i < 3; i++) {
                assertEquals(n, small.size(prefix + i));
            }
        }
    }

    @Test
    void badKeysAreInvalidArguments() {
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> store.put("", pattern(1, 1), PutOptions.DEFAULT)).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> store.getInto("a\0b", arena.allocate(1))).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> store.size(null)).code());
    }

    @Test
    void batchesMixRegisteredAndStagedMemoryAndReportPerKey() {
        MemorySegment region = arena.allocate(1 << 16, 4096);
        store.register(region);
        try {
            int count = 10;
            String[] keys = new String[count];
            MemorySegment[] values = new MemorySegment[count];
            for (int i = 0; i < count; i++) {
                keys[i] = prefix + "b" + i;
                values[i] = i % 2 == 0 ? pattern(1000 + i, i) : region.asSlice(i * 4096L, 1000 + i);
                if (i % 2 == 1) {
                    values[i].copyFrom(pattern(1000 + i, i));
                }
            }
            boolean[] stored = new boolean[count];
            store.putBatch(keys, values, count, PutOptions.DEFAULT, stored);
            for (boolean b : stored) {
                assertTrue(b);
            }
            String[] getKeys = new String[count + 2];
            MemorySegment[] dsts = new MemorySegment[count + 2];
            for (int i = 0; i < count; i++) {
                getKeys[i] = keys[i];
                dsts[i] = i % 3 == 0 ? region.asSlice(32768 + i * 2048L, 2048) : arena.allocate(2048);
            }
            getKeys[count] = prefix + "absent";
            dsts[count] = arena.allocate(10);
            getKeys[count + 1] = keys[0];
            dsts[count + 1] = arena.allocate(10);
            long[] results = new long[count + 2];
            store.getIntoBatch(getKeys, dsts, count + 2, results);
            for (int i = 0; i < count; i++) {
                assertEquals(1000 + i, results[i], "key " + i);
                assertPattern(dsts[i], 1000 + i, i);
            }
            assertTrue(GetResult.isMiss(results[count]));
            assertEquals(1000, GetResult.requiredSize(results[count + 1]));
        } finally {
            store.unregister(region);
        }
    }

    @Test
    void batchPutIfAbsentReportsWhichKeysItStored() {
        assertTrue(store.put(prefix + "1", pattern(10, 1), PutOptions.DEFAULT));
        String[] keys = {prefix + "0", prefix + "1", prefix + "2"};
        MemorySegment[] values = {pattern(20, 0), pattern(20, 1), pattern(20, 2)};
        boolean[] stored = new boolean[3];
        store.putBatch(keys, values, 3, PutOptions.DEFAULT.withIfAbsent(true), stored);
        assertTrue(stored[0]);
        assertFalse(stored[1]);
        assertTrue(stored[2]);
        assertEquals(10, store.size(prefix + "1"));
    }

    @Test
    void registerRejectsOverlapsAndUnregisterRejectsUnknownRanges() {
        MemorySegment region = arena.allocate(1 << 16, 4096);
        store.register(region);
        KVException overlap = assertThrows(KVException.class, () -> store.register(region.asSlice(4096, 4096)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, overlap.code());
        assertTrue(overlap.getMessage().contains("overlaps"), overlap.getMessage());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> store.unregister(region.asSlice(0, 4096))).code());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class,
                () -> store.register(MemorySegment.ofArray(new byte[16]))).code());
        store.unregister(region);
        store.register(region);
        assertEquals(1, store.callerRegistrations());
        store.unregister(region);
        assertEquals(0, store.callerRegistrations());
    }

    @Test
    void closeReleasesRegistrationsAndLaterCallsFailWithClosed() {
        MooncakeStore s = openWith("");
        MemorySegment region = arena.allocate(8192, 4096);
        s.register(region);
        assertEquals(1, s.callerRegistrations());
        s.close();
        s.close();
        assertEquals(0, s.callerRegistrations());
        KVException e = assertThrows(KVException.class, () -> s.size(prefix + "x"));
        assertEquals(ErrorCode.CLOSED, e.code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> s.register(region)).code());
    }

    @Test
    void twoClientsOfOneMasterShareObjects() {
        try (MooncakeStore other = target.open(storeMaster(), "")) {
            assertTrue(store.put(prefix + "shared", pattern(64, 5), PutOptions.DEFAULT));
            MemorySegment dst = arena.allocate(64);
            assertEquals(64, other.getInto(prefix + "shared", dst));
            assertPattern(dst, 64, 5);
        }
    }

    @Test
    void healthCheckNamesTheClientAndTheMaster() {
        String h = store.healthCheck();
        assertTrue(h.contains("healthy") && h.contains(store.config().masterServerAddress()), h);
    }

    @Test
    void removeMatchingRemovesOnlyMatchingKeys() {
        for (int i = 0; i < 4; i++) {
            assertTrue(store.put(prefix + (i < 2 ? "gc-" : "keep-") + i, pattern(8, i), PutOptions.DEFAULT));
        }
        assertEquals(2, store.removeMatching("^" + prefix + "gc-"));
        assertEquals(-1, store.size(prefix + "gc-0"));
        assertEquals(8, store.size(prefix + "keep-3"));
    }

    @Test
    void theProviderOpensMooncakeUrisThroughServiceLoader() {
        try (KVStore s = KVStores.open(target.uri(target.freshMaster(), ""))) {
            assertInstanceOf(MooncakeStore.class, s);
        }
    }

    @Test
    void aSetupFailureNamesTheMasterAndLocalHostname() {
        assumeTrue(target.isDouble(), "the double rejects a local_hostname with a bad port");
        KVException e = assertThrows(KVException.class, () -> MooncakeStore.open(
                StoreUri.parse(target.uri(target.freshMaster(), "&local_hostname=127.0.0.1:0")), Map.of()));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals(-600, e.nativeCode());
        assertEquals("setup", e.operation());
        assertTrue(e.hint().contains("local_hostname 127.0.0.1:0") && e.hint().contains("master "), e.hint());
    }

    @Test
    void passwordsInTheMetadataAddressNeverReachMessages() {
        assertEquals("redis://u:***@h:6379", MooncakeStore.withoutPassword("redis://u:secret@h:6379"));
        assertEquals("http://h:8080/metadata", MooncakeStore.withoutPassword("http://h:8080/metadata"));
    }

    private String storeMaster() {
        return store.config().masterServerAddress();
    }
}
