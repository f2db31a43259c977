package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Several JVMs on one store: concurrent writers and readers, and processes killed with SIGKILL mid-operation. */
class ShmMultiProcessTest {
    private static final long PAUSE = 60_000;

    @RegisterExtension
    final ShmProcessBench bench = new ShmProcessBench("mp");

    @Test
    void threeWriterAndThreeReaderProcessesNeverSeeATornValue() throws Exception {
        String options = "capacity=1MiB&entries=64";
        ShmStore s = bench.open(options);
        int keys = 48;
        for (int i = 0; i < keys; i++) {
            s.put("key-" + i, bench.pattern(16 + 8 * i, i), PutOptions.DEFAULT);
        }
        for (int i = 0; i < 3; i++) {
            bench.child(Map.of(), "write", bench.uri(options), "4000", String.valueOf(keys), String.valueOf(i + 1));
            bench.child(Map.of(), "read", bench.uri(options), "4000", String.valueOf(keys));
        }
        long hits = 0;
        long puts = 0;
        for (ChildJvm c : bench.children()) {
            String done = c.await("DONE", 30);
            assertEquals(0, c.exitCode(10), c.output());
            assertFalse(c.output().contains("TORN"), c.output());
            if (done.contains("hits=")) {
                hits += Long.parseLong(done.substring(done.indexOf("hits=") + 5));
            } else {
                puts += Long.parseLong(done.substring(done.indexOf("puts=") + 5, done.indexOf(" full")));
            }
        }
        assertTrue(hits > 100, "readers hit " + hits + " times");
        assertTrue(puts > 100, "writers put " + puts + " times");
        assertEquals(0, s.leasesHeld(), "every reader released its leases");
        for (int i = 0; i < keys; i++) {
            s.remove("key-" + i);
        }
        s.reclaim();
        assertEquals(1 << 20, s.freeBytes(), "no block leaked across " + puts + " puts in three processes");
        assertEquals(0, s.liveEntries());
    }

    @Test
    void aWriterKilledMidPutLeavesNoPartialEntryAndLosesNoSpace() throws Exception {
        ShmStore s = bench.open("capacity=64MiB");
        long initial = s.freeBytes();
        s.put("stable", bench.pattern(1 << 20, 11), PutOptions.DEFAULT);
        s.put("big", bench.pattern(1 << 20, 12), PutOptions.DEFAULT);
        ChildJvm writer = bench.child(Map.of(ShmStore.PROP_PUT_PAUSE_MS, String.valueOf(PAUSE)),
                "put", bench.uri("capacity=64MiB"), "big", String.valueOf(16 << 20), "13");
        writer.await("PUTTING", 20);
        ShmProcessBench.awaitTrue("the child has reserved 16 MiB", () -> s.freeBytes() == initial - (18L << 20));
        MemorySegment dst = bench.arena().allocate(16 << 20, 8);
        assertEquals(1 << 20, s.getInto("big", dst), "readers still see the old value during the put");
        assertEquals(12, ValuePattern.seed(dst));
        writer.kill();

        assertEquals(1 << 20, s.getInto("big", dst), "the dead writer's half value never became visible");
        assertNull(ValuePattern.verify(dst, 1 << 20));
        assertEquals(12, ValuePattern.seed(dst));
        ChildJvm fresh = bench.child(Map.of(), "put", bench.uri("capacity=64MiB"), "big", String.valueOf(16 << 20), "14");
        fresh.await("PUT true", 20);
        assertEquals(0, fresh.exitCode(10), fresh.output());
        assertEquals(16 << 20, s.getInto("big", dst));
        assertNull(ValuePattern.verify(dst, 16 << 20));
        assertEquals(14, ValuePattern.seed(dst));

        s.reclaim();
        assertEquals(initial - (17L << 20), s.freeBytes(), "the dead writer's 16 MiB came back");
        assertTrue(s.remove("big"));
        assertTrue(s.remove("stable"));
        assertEquals(initial, s.freeBytes());
    }

    @Test
    void aReaderKilledWhileHoldingALeaseDelaysReclaimOnlyUntilItIsFoundDead() throws Exception {
        ShmStore s = bench.open("capacity=16MiB");
        long initial = s.freeBytes();
        s.put("k", bench.pattern(8 << 20, 21), PutOptions.DEFAULT);
        ChildJvm reader = bench.child(Map.of(ShmStore.PROP_GET_PAUSE_MS, String.valueOf(PAUSE)),
                "get", bench.uri("capacity=16MiB"), "k", String.valueOf(8 << 20));
        // Not a poll of the lease records: one can see the child's lease before the child has checked it against
        // the index, and the remove below then makes the child drop it and miss, so nothing is leased any more.
        reader.await("PAUSED", 20);
        assertEquals(1, s.leasesHeld(), "the child, paused in its copy, holds one lease");

        assertTrue(s.remove("k"));
        assertFalse(s.exists("k"));
        assertEquals(initial - (8L << 20), s.freeBytes(), "a leased value is not freed under its reader");
        s.put("k", bench.pattern(4 << 20, 22), PutOptions.DEFAULT);
        s.put("k2", bench.pattern(4 << 20, 23), PutOptions.DEFAULT);
        assertEquals(0, s.freeBytes(), "new values do not overwrite the leased one");
        reader.kill();

        // 12 MiB fit only once the dead reader's 8 MiB are back: evicting k and k2 alone frees 8 MiB.
        assertTrue(s.put("k3", bench.pattern(12 << 20, 24), PutOptions.DEFAULT),
                "a put under pressure finds the reader dead and takes its space");
        assertEquals(0, s.leasesHeld());
        assertEquals(12 << 20, s.getInto("k3", bench.arena().allocate(12 << 20, 8)));
        assertTrue(s.remove("k3"));
        assertEquals(initial, s.freeBytes());
    }

    @Test
    void aProcessKilledHoldingTheLockIsRecoveredAndTheStoreStaysConsistent() throws Exception {
        ShmStore s = bench.open("capacity=8MiB&lock-timeout=300ms");
        long initial = s.freeBytes();
        s.put("before", bench.pattern(1 << 20, 31), PutOptions.DEFAULT);
        ChildJvm holder = bench.child(Map.of(ShmStore.PROP_LOCK_PAUSE_MS, String.valueOf(PAUSE)),
                "put", bench.uri("capacity=8MiB"), "x", String.valueOf(1 << 20), "32");
        holder.await("PUTTING", 20);
        // The child takes the lock briefly to allocate; only a hold that lasts is the paused publish.
        ShmProcessBench.awaitTrue("the child holds the lock for good", () -> {
            if (ProcessIdentity.pid(s.lockOwner()) != holder.pid()) {
                return false;
            }
            LockSupport.parkNanos(200_000_000);
            return ProcessIdentity.pid(s.lockOwner()) == holder.pid();
        });
        MemorySegment dst = bench.arena().allocate(1 << 20, 8);
        assertEquals(1 << 20, s.getInto("before", dst), "reads need no lock");
        KVException stuck = assertThrows(KVException.class, () -> s.put("blocked", bench.pattern(16, 1),
                PutOptions.DEFAULT));
        assertEquals(ErrorCode.TIMEOUT, stuck.code());
        assertTrue(stuck.getMessage().contains("process " + holder.pid()), stuck.getMessage());
        holder.kill();

        assertTrue(s.put("after", bench.pattern(1 << 20, 33), PutOptions.DEFAULT), "the lock is taken over");
        assertEquals(GetResult.MISS, s.getInto("x", dst), "the put that died before publishing is not there");
        assertEquals(1 << 20, s.getInto("before", dst));
        assertEquals(31, ValuePattern.seed(dst));
        assertEquals(initial - (2L << 20), s.freeBytes(), "the dead put's space was reclaimed by the repair");
        assertFalse(s.exists("blocked"));

        s.close();
        ShmStore reopened = bench.open("");
        assertEquals(1 << 20, reopened.getInto("after", dst));
        assertNull(ValuePattern.verify(dst, 1 << 20));
        assertTrue(reopened.remove("before"));
        assertTrue(reopened.remove("after"));
        assertEquals(initial, reopened.freeBytes());
        assertEquals(0, reopened.lockOwner());
    }

    @Test
    void processesRacingToCreateAStoreAllOpenTheSameOne() throws Exception {
        for (int i = 0; i < 3; i++) {
            bench.child(Map.of(), "put", bench.uri("capacity=4MiB"), "from-" + i, "4096", String.valueOf(40 + i));
        }
        for (ChildJvm c : bench.children()) {
            c.await("PUT true", 20);
            assertEquals(0, c.exitCode(10), c.output());
        }
        ShmStore s = bench.open("capacity=4MiB");
        MemorySegment dst = bench.arena().allocate(4096, 8);
        for (int i = 0; i < 3; i++) {
            assertEquals(4096, s.getInto("from-" + i, dst), "from-" + i);
            assertEquals(40 + i, ValuePattern.seed(dst));
        }
    }

    @Test
    void writersAndReadersKilledAtRandomMomentsLeaveAConsistentStore() throws Exception {
        String options = "capacity=1MiB&entries=64";
        ShmStore s = bench.open(options);
        int keys = 32;
        List<ChildJvm> victims = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            victims.add(bench.child(Map.of(), "write", bench.uri(options), "60000", String.valueOf(keys), String.valueOf(50 + i)));
        }
        victims.add(bench.child(Map.of(), "read", bench.uri(options), "60000", String.valueOf(keys)));
        for (ChildJvm v : victims) {
            v.await("OPEN", 20);
        }
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(7);
        for (ChildJvm v : victims) {
            Thread.sleep(300 + rnd.nextInt(700));
            v.kill();
        }
        s.reclaim();
        MemorySegment dst = bench.arena().allocate(64 << 10, 8);
        int hits = 0;
        for (int i = 0; i < keys; i++) {
            long r = s.getInto("key-" + i, dst);
            if (GetResult.isHit(r)) {
                hits++;
                assertNull(ValuePattern.verify(dst, r), "key-" + i);
            }
        }
        assertTrue(hits > 0, "some values survived");
        assertEquals(0, s.leasesHeld());
        for (int i = 0; i < keys; i++) {
            s.remove("key-" + i);
        }
        assertEquals(1 << 20, s.freeBytes(), "every block came back after four processes died mid-work");
        s.close();
        ShmStore reopened = bench.open("");
        assertEquals(1 << 20, reopened.freeBytes());
        assertTrue(reopened.put("after", bench.pattern(4096, 1), PutOptions.DEFAULT));
    }

    /**
     * The other half of the truncation tests (the first half, a file cut before the call, is checked before the
     * mapping is touched: {@code ShmStoreTest}): a file cut while a child's copy runs. The child's put, then its
     * get, pause half-way through their copies (test hooks); this process truncates the file into the part not yet
     * copied; the copy's second half faults on the lost pages, and the store catches the JVM's fault and names the
     * file instead. The child survives, the put becomes visible to no one and its blocks come back, and the value
     * before the cut stays readable.
     */
    @Test
    void aFileTruncatedWhileAChildCopiesFailsTheChildsPutAndGetNamingTheFileAndKeepsWhatLiesBeforeTheCut()
            throws Exception {
        String options = "capacity=32MiB&entries=1024";
        ShmStore s = bench.open(options);
        ShmLayout lay = ShmLayout.of(32 << 20, 4096, 1024);
        long initial = s.freeBytes();
        s.put("low", bench.pattern(64 << 10, 1), PutOptions.DEFAULT);
        long cut = lay.payloadOffset() + (1 << 20);

        ChildJvm writer = bench.child(Map.of(ShmStore.PROP_PUT_PAUSE_MS, "2000"), "put", bench.uri(options), "big",
                String.valueOf(8 << 20), "2");
        writer.await("PAUSED", 30);
        truncate(s.path(), cut);
        String failed = writer.await("FAILED", 30);
        assertEquals(5, writer.exitCode(30), writer.output());
        assertTrue(failed.startsWith("FAILED CORRUPT_OBJECT") && failed.contains(s.path() + " is " + cut
                + " bytes, but this store mapped it at " + lay.fileSize() + " bytes: another process truncated or "
                + "replaced it"), writer.output());
        assertFalse(s.exists("big"), "the cut put became visible");
        assertEquals(initial - (64 << 10), s.freeBytes(), "the cut put's blocks came back");

        extend(s.path(), lay.fileSize());
        s.put("big", bench.pattern(8 << 20, 3), PutOptions.DEFAULT);
        ChildJvm reader = bench.child(Map.of(ShmStore.PROP_GET_PAUSE_MS, "2000"), "get", bench.uri(options), "big",
                String.valueOf(8 << 20));
        reader.await("PAUSED", 30);
        truncate(s.path(), cut);
        String got = reader.await("FAILED", 30);
        assertEquals(5, reader.exitCode(30), reader.output());
        assertTrue(got.startsWith("FAILED CORRUPT_OBJECT") && got.contains(s.path() + " is " + cut + " bytes"),
                reader.output());
        assertEquals(0, s.leasesHeld(), "the failed get let go of its lease");

        MemorySegment dst = bench.arena().allocate(64 << 10, 8);
        assertEquals(64 << 10, s.getInto("low", dst));
        assertNull(ValuePattern.verify(dst, 64 << 10));
        assertEquals(1, ValuePattern.seed(dst));
    }

    private static void truncate(java.nio.file.Path file, long size) throws java.io.IOException {
        try (var ch = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE)) {
            ch.truncate(size);
        }
    }

    /** Makes the file {@code size} bytes long again; the pages a truncation took come back as zeros. */
    private static void extend(java.nio.file.Path file, long size) throws java.io.IOException {
        try (var raf = new java.io.RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(size);
        }
    }
}
