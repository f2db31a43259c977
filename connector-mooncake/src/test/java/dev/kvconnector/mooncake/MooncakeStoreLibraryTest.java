package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The raw ABI binding, one C function at a time, against the test double or a real library. */
class MooncakeStoreLibraryTest {
    private static final MooncakeStoreLibrary.Replication ONE =
            new MooncakeStoreLibrary.Replication(1, false, false, List.of());

    private MooncakeTestTarget target;
    private MooncakeStoreLibrary lib;
    private MemorySegment store;
    private Arena arena;
    private MemorySegment buffer;
    private String prefix;

    @BeforeEach
    void setUp() {
        target = MooncakeTestTarget.require();
        lib = MooncakeStoreLibrary.load(new MooncakeLibraryLocation(Path.of(target.library()), "lib", "test"));
        store = lib.create();
        assertNotEquals(MemorySegment.NULL, store);
        assertEquals(0, lib.setup(store, target.localHostname(), target.metadata(), 64L << 20, 16L << 20, "tcp", "",
                target.freshMaster()));
        arena = Arena.ofConfined();
        buffer = arena.allocate(1 << 20, 4096);
        assertEquals(0, lib.registerBuffer(store, buffer, buffer.byteSize()));
        prefix = MooncakeTestTarget.uniquePrefix();
    }

    @AfterEach
    void tearDown() {
        if (store != null) {
            lib.removeByRegex(store, "^" + prefix, true);
            assertEquals(0, lib.unregisterBuffer(store, buffer));
            lib.destroy(store);
        }
        if (arena != null) {
            arena.close();
        }
    }

    private MemorySegment fill(long offset, int n, int seed) {
        MemorySegment s = buffer.asSlice(offset, n);
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
        }
        return s;
    }

    private static void assertPattern(MemorySegment s, int n, int seed) {
        for (int i = 0; i < n; i++) {
            assertEquals((byte) (seed + i * 31), s.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }
    }

    @Test
    void replicateConfigLayoutMatchesTheCStruct() {
        MemoryLayout l = MooncakeStoreLibrary.REPLICATE_CONFIG;
        assertEquals(32, l.byteSize());
        assertEquals(0, l.byteOffset(MemoryLayout.PathElement.groupElement("replica_num")));
        assertEquals(8, l.byteOffset(MemoryLayout.PathElement.groupElement("with_soft_pin")));
        assertEquals(12, l.byteOffset(MemoryLayout.PathElement.groupElement("with_hard_pin")));
        assertEquals(16, l.byteOffset(MemoryLayout.PathElement.groupElement("preferred_segments")));
        assertEquals(24, l.byteOffset(MemoryLayout.PathElement.groupElement("preferred_segments_count")));
    }

    @Test
    void loadCachesOneBindingPerLibrary() {
        assertTrue(lib == MooncakeStoreLibrary.load(
                new MooncakeLibraryLocation(Path.of(target.library()), "other", "again")));
    }

    @Test
    void healthCheckIsOneBeforeSetupZeroAfterAndMinusOneForNull() {
        MemorySegment fresh = lib.create();
        try {
            assertEquals(1, lib.healthCheck(fresh));
        } finally {
            lib.destroy(fresh);
        }
        assertEquals(0, lib.healthCheck(store));
        assertEquals(-1, lib.healthCheck(MemorySegment.NULL));
        lib.destroy(MemorySegment.NULL);
    }

    @Test
    void setupRejectsAnEmptyLocalHostnameWith600() {
        MemorySegment fresh = lib.create();
        try {
            assertEquals(-600, lib.setup(fresh, "", target.metadata(), 1 << 20, 1 << 20, "tcp", "",
                    target.freshMaster()));
        } finally {
            lib.destroy(fresh);
        }
    }

    @Test
    void putCopiesThroughTheLocalBufferAndGetIntoReturnsTheWholeObject() {
        MemorySegment src = fill(0, 1000, 7);
        assertEquals(0, lib.put(store, prefix + "a", src, 1000, ONE));
        MemorySegment dst = buffer.asSlice(4096, 4096);
        assertEquals(1000, lib.getInto(store, prefix + "a", dst, dst.byteSize()));
        assertPattern(dst, 1000, 7);
    }

    @Test
    void putWithANullConfigMeansOneReplica() {
        assertEquals(0, lib.putFrom(store, prefix + "n", fill(0, 64, 1), 64, null));
        assertEquals(64, lib.getSize(store, prefix + "n"));
    }

    @Test
    void putOnAnExistingKeyReturnsZeroAndKeepsTheOldValue() {
        assertEquals(0, lib.putFrom(store, prefix + "k", fill(0, 100, 1), 100, ONE));
        assertEquals(0, lib.putFrom(store, prefix + "k", fill(0, 200, 2), 200, ONE));
        MemorySegment dst = buffer.asSlice(8192, 4096);
        assertEquals(100, lib.getInto(store, prefix + "k", dst, dst.byteSize()));
        assertPattern(dst, 100, 1);
    }

    @Test
    void putFromOfZeroBytesStoresNothing() {
        assertEquals(0, lib.putFrom(store, prefix + "empty", buffer, 0, ONE));
        assertEquals(-704, lib.getSize(store, prefix + "empty"));
    }

    @Test
    void replicaNumZeroIsRejectedWith600() {
        MooncakeStoreLibrary.Replication zero = new MooncakeStoreLibrary.Replication(0, false, false, List.of());
        assertEquals(-600, lib.putFrom(store, prefix + "z", fill(0, 10, 1), 10, zero));
    }

    @Test
    void pinsAndPreferredSegmentsAreAccepted() {
        MooncakeStoreLibrary.Replication r = new MooncakeStoreLibrary.Replication(1, true, true,
                List.of(lib.hostname(store)));
        assertEquals(0, lib.putFrom(store, prefix + "pinned", fill(0, 10, 1), 10, r));
        assertEquals(10, lib.getSize(store, prefix + "pinned"));
    }

    @Test
    void getIntoAMissingKeyIs704() {
        assertEquals(-704, lib.getInto(store, prefix + "missing", buffer, 100));
    }

    @Test
    void getIntoATooSmallBufferIs600AndCopiesNothing() {
        assertEquals(0, lib.putFrom(store, prefix + "big", fill(0, 500, 3), 500, ONE));
        MemorySegment dst = buffer.asSlice(65536, 499);
        dst.fill((byte) 0x5A);
        assertEquals(-600, lib.getInto(store, prefix + "big", dst, 499));
        for (int i = 0; i < 499; i++) {
            assertEquals((byte) 0x5A, dst.get(ValueLayout.JAVA_BYTE, i));
        }
    }

    @Test
    void getSizeReturnsTheSizeOr704() {
        assertEquals(0, lib.putFrom(store, prefix + "s", fill(0, 321, 3), 321, ONE));
        assertEquals(321, lib.getSize(store, prefix + "s"));
        assertEquals(-704, lib.getSize(store, prefix + "nope"));
    }

    @Test
    void isExistAndBatchIsExistAnswerOneOrZero() {
        assertEquals(0, lib.putFrom(store, prefix + "e", fill(0, 8, 3), 8, ONE));
        assertEquals(1, lib.isExist(store, prefix + "e"));
        assertEquals(0, lib.isExist(store, prefix + "f"));
        int[] out = new int[3];
        assertEquals(0, lib.batchIsExist(store, new String[] {prefix + "f", prefix + "e", prefix + "g"}, 3, out));
        assertEquals(0, out[0]);
        assertEquals(1, out[1]);
        assertEquals(0, out[2]);
    }

    @Test
    void batchPutFromAndBatchGetIntoReportAResultPerKey() {
        String[] keys = {prefix + "b0", prefix + "b1", prefix + "b2"};
        MemorySegment[] src = {fill(0, 100, 10), fill(100, 200, 20), fill(300, 300, 30)};
        long[] sizes = {100, 200, 300};
        int[] putResults = new int[3];
        assertEquals(0, lib.batchPutFrom(store, keys, src, sizes, 3, ONE, putResults));
        assertEquals(0, putResults[0] | putResults[1] | putResults[2]);

        String[] getKeys = {keys[0], prefix + "absent", keys[2], keys[1]};
        MemorySegment[] dst = {buffer.asSlice(4096, 1000), buffer.asSlice(8192, 1000), buffer.asSlice(12288, 1000),
                buffer.asSlice(16384, 150)};
        long[] dstSizes = {1000, 1000, 1000, 150};
        long[] getResults = new long[4];
        assertEquals(0, lib.batchGetInto(store, getKeys, dst, dstSizes, 4, getResults));
        assertEquals(100, getResults[0]);
        assertEquals(-704, getResults[1]);
        assertEquals(300, getResults[2]);
        assertEquals(-600, getResults[3]);
        assertPattern(dst[0], 100, 10);
        assertPattern(dst[2], 300, 30);
    }

    @Test
    void getHostnameWritesHostPortAndFailsOnATinyBuffer() {
        String host = lib.hostname(store);
        assertNotNull(host);
        assertTrue(host.matches("[^:]+:\\d+"), host);
        MemorySegment tiny = arena.allocate(4);
        assertEquals(-1, lib.getHostname(store, tiny, 4));
    }

    @Test
    void removeIs704WhenMissing706WhenLeasedAndSucceedsWithForce() {
        assertEquals(-704, lib.remove(store, prefix + "r", false));
        assertEquals(0, lib.putFrom(store, prefix + "r", fill(0, 16, 1), 16, ONE));
        assertEquals(1, lib.isExist(store, prefix + "r"));
        assertEquals(-706, lib.remove(store, prefix + "r", false));
        assertEquals(0, lib.remove(store, prefix + "r", true));
        assertEquals(-704, lib.getSize(store, prefix + "r"));
    }

    @Test
    void removeWithoutForceSucceedsOnceTheLeaseEnds() throws InterruptedException {
        assumeTrue(target.isDouble(), "lease length known only for the double (MOONCAKE_DOUBLE_LEASE_MS)");
        assertEquals(0, lib.putFrom(store, prefix + "l", fill(0, 16, 1), 16, ONE));
        assertEquals(16, lib.getInto(store, prefix + "l", buffer.asSlice(4096, 64), 64));
        assertEquals(-706, lib.remove(store, prefix + "l", false));
        Thread.sleep(Long.parseLong(System.getenv().getOrDefault("MOONCAKE_DOUBLE_LEASE_MS", "10000")) + 100);
        assertEquals(0, lib.remove(store, prefix + "l", false));
    }

    @Test
    void removeByRegexCountsTheObjectsItRemoved() {
        for (int i = 0; i < 5; i++) {
            assertEquals(0, lib.putFrom(store, prefix + (i < 3 ? "x-" : "y-") + i, fill(0, 8, i), 8, ONE));
        }
        assertEquals(3, lib.removeByRegex(store, "^" + prefix + "x-", false));
        assertEquals(-704, lib.getSize(store, prefix + "x-0"));
        assertEquals(8, lib.getSize(store, prefix + "y-4"));
    }

    @Test
    void removeAllCountsTheObjectsItRemovedAndSparesLeasedOnesWithoutForce() {
        assumeTrue(target.isDouble(), "remove_all would empty a shared real pool");
        for (int i = 0; i < 4; i++) {
            assertEquals(0, lib.putFrom(store, prefix + i, fill(0, 8, i), 8, ONE));
        }
        assertEquals(1, lib.isExist(store, prefix + 0));
        assertEquals(3, lib.removeAll(store, false));
        assertEquals(1, lib.removeAll(store, true));
    }

    @Test
    void registerBufferRejectsNullZeroAndOverlappingRanges() {
        assertEquals(-1, lib.registerBuffer(store, MemorySegment.NULL, 0));
        assertEquals(-1, lib.registerBuffer(store, buffer, 0));
        assertTrue(lib.registerBuffer(store, buffer.asSlice(4096, 4096), 4096) < 0, "overlap must fail");
        MemorySegment other = arena.allocate(8192, 4096);
        assertEquals(0, lib.registerBuffer(store, other, other.byteSize()));
        assertEquals(0, lib.unregisterBuffer(store, other));
        assertTrue(lib.unregisterBuffer(store, other) < 0, "a second unregister must fail");
    }

    @Test
    void bufferSizesBeyondTheSegmentNeverReachNativeCode() {
        MemorySegment small = buffer.asSlice(0, 16);
        assertThrows(IndexOutOfBoundsException.class, () -> lib.getInto(store, prefix + "x", small, 17));
        assertThrows(IndexOutOfBoundsException.class, () -> lib.putFrom(store, prefix + "x", small, 1 << 20, ONE));
    }

    @Test
    void heapSegmentsAreRejectedBeforeTheCall() {
        KVException e = assertThrows(KVException.class,
                () -> lib.putFrom(store, prefix + "h", MemorySegment.ofArray(new byte[8]), 8, ONE));
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, e.code());
    }

    @Test
    void theDoubleRequiresRegisteredBuffersForZeroCopyCalls() {
        assumeTrue(target.isDouble(), "the real store over TCP accepts unregistered buffers");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment unregistered = a.allocate(64);
            assertEquals(-800, lib.putFrom(store, prefix + "u", unregistered, 64, ONE));
            assertEquals(-800, lib.getInto(store, prefix + "u", unregistered, 64));
        }
    }

    @Test
    void theDoubleAnswersCallsBeforeSetupWith601InitAllWith1012AndEmptyKeysWith400() {
        assumeTrue(target.isDouble(), "behaviour of the double only");
        MemorySegment fresh = lib.create();
        try {
            assertEquals(-601, lib.getSize(fresh, "k"));
            assertEquals(-1012, lib.initAll(fresh, "tcp", "", 1 << 20));
            assertEquals(-400, lib.putFrom(store, "", fill(0, 8, 1), 8, ONE));
        } finally {
            lib.destroy(fresh);
        }
    }
}
