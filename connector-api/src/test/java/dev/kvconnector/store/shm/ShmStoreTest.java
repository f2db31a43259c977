package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.store.StoreUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ShmStoreTest {
    private Path dir;
    private Arena arena;
    private final List<ShmStore> opened = new ArrayList<>();

    @BeforeEach
    void makeDir() throws IOException {
        dir = ShmTestFiles.newDir();
        arena = Arena.ofConfined();
    }

    @AfterEach
    void cleanUp() throws IOException {
        opened.forEach(ShmStore::close);
        arena.close();
        ShmTestFiles.delete(dir);
    }

    private ShmStore open(String name, String options) {
        ShmStore s = ShmStore.open(StoreUri.parse("shm:/" + name + "?dir=" + dir + (options.isEmpty() ? "" : "&")
                + options));
        opened.add(s);
        return s;
    }

    private MemorySegment pattern(long len, long seed) {
        MemorySegment v = arena.allocate(len, 8);
        ValuePattern.fill(v, len, seed);
        return v;
    }

    private static KVException assertKv(ErrorCode code, org.junit.jupiter.api.function.Executable call) {
        KVException e = assertThrows(KVException.class, call);
        assertEquals(code, e.code(), e.getMessage());
        return e;
    }

    @Test
    void putThenGetIntoCopiesEveryByte() {
        ShmStore s = open("a", "capacity=4MiB");
        assertTrue(s.put("k", pattern(100_000, 7), PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(200_000);
        long r = s.getInto("k", dst);
        assertEquals(100_000, r);
        assertNull(ValuePattern.verify(dst, r));
        assertEquals(7, ValuePattern.seed(dst));
        assertEquals(100_000, s.size("k"));
        assertTrue(s.exists("k"));
        assertEquals(Set.of(StoreCapability.NATIVE_TTL, StoreCapability.SHARED_ACROSS_PROCESSES,
                StoreCapability.LOCAL_MEMORY, StoreCapability.REMOVE, StoreCapability.CLAIM, StoreCapability.VIEW,
                StoreCapability.EVENTS),
                s.capabilities());
    }

    @Test
    void getIntoReturnsTooSmallWithRealSizeAndCopiesNothing() {
        ShmStore s = open("a", "capacity=4MiB");
        s.put("k", pattern(4096, 1), PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(4095);
        dst.fill((byte) 0x5A);
        long r = s.getInto("k", dst);
        assertTrue(GetResult.isTooSmall(r));
        assertEquals(4096, GetResult.requiredSize(r));
        for (long i = 0; i < dst.byteSize(); i++) {
            assertEquals((byte) 0x5A, dst.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " was overwritten");
        }
    }

    @Test
    void absentKeysAreMissesNotExceptions() {
        ShmStore s = open("a", "capacity=1MiB");
        assertEquals(GetResult.MISS, s.getInto("nope", arena.allocate(16)));
        assertEquals(-1, s.size("nope"));
        assertFalse(s.exists("nope"));
        assertFalse(s.remove("nope"));
    }

    @Test
    void removeDeletesAndReturnsTheSpace() {
        ShmStore s = open("a", "capacity=1MiB&block=4KiB");
        long free = s.freeBytes();
        assertEquals(1 << 20, free);
        s.put("k", pattern(10_000, 1), PutOptions.DEFAULT);
        assertEquals(free - 12_288, s.freeBytes(), "10000 bytes take three 4 KiB blocks");
        assertTrue(s.remove("k"));
        assertFalse(s.exists("k"));
        assertFalse(s.remove("k"));
        assertEquals(free, s.freeBytes());
    }

    @Test
    void putReplacesTheValueAndIfAbsentKeepsTheFirst() {
        ShmStore s = open("a", "capacity=1MiB");
        MemorySegment dst = arena.allocate(64 << 10);
        assertTrue(s.put("k", pattern(1000 * 8, 1), PutOptions.DEFAULT));
        assertTrue(s.put("k", pattern(2000 * 8, 2), PutOptions.DEFAULT));
        assertEquals(16_000, s.getInto("k", dst));
        assertEquals(2, ValuePattern.seed(dst));
        assertFalse(s.put("k", pattern(16, 3), PutOptions.DEFAULT.withIfAbsent(true)));
        assertEquals(16_000, s.getInto("k", dst));
        assertTrue(s.put("other", pattern(16, 4), PutOptions.DEFAULT.withIfAbsent(true)));
        assertEquals(2, s.liveEntries());
        assertEquals((1 << 20) - 16_384 - 4096, s.freeBytes(), "the replaced value's space was freed");
    }

    @Test
    void aConsumedRequestsSpaceTakesTheNextRequestInsteadOfFreshPages() throws Exception {
        assumeTrue(dir.startsWith("/dev/shm"), "needs tmpfs, where a file's allocated pages are the ones written");
        ShmStore s = open("reuse", "capacity=64MiB");
        Path file = dir.resolve("reuse");
        MemorySegment value = pattern(1 << 20, 1);
        long afterFirst = 0;
        for (int request = 0; request < 6; request++) {
            for (int layer = 0; layer < 8; layer++) {
                assertTrue(s.put("r" + request + "-L" + layer, value, PutOptions.DEFAULT));
            }
            for (int layer = 0; layer < 8; layer++) {
                assertTrue(s.remove("r" + request + "-L" + layer));
            }
            if (request == 0) {
                afterFirst = allocatedBytes(file);
            }
        }
        assertTrue(afterFirst >= 8L << 20, "the first request wrote " + afterFirst + " bytes of pages");
        long grown = allocatedBytes(file) - afterFirst;
        assertTrue(grown < 1L << 20, "five more requests of the same size touched " + grown
                + " bytes of fresh pages instead of reusing the space the first one freed");
    }

    /** The bytes of pages the file holds (st_blocks), which on tmpfs are the pages ever written. */
    private static long allocatedBytes(Path file) throws IOException, InterruptedException {
        Process stat = new ProcessBuilder("stat", "-c", "%b %B", file.toString()).redirectErrorStream(true).start();
        String[] out = new String(stat.getInputStream().readAllBytes(), StandardCharsets.US_ASCII)
                .trim().split(" ");
        assertEquals(0, stat.waitFor(), String.join(" ", out));
        return Long.parseLong(out[0]) * Long.parseLong(out[1]);
    }

    @Test
    void entriesExpireAfterTheirTtlAndTheirSpaceIsReclaimed() throws InterruptedException {
        ShmStore s = open("a", "capacity=1MiB");
        long free = s.freeBytes();
        s.put("short", pattern(4096, 1), PutOptions.DEFAULT.withTtlMillis(400));
        s.put("long", pattern(4096, 2), PutOptions.DEFAULT.withTtlMillis(60_000));
        assertTrue(s.exists("short"));
        Thread.sleep(500);
        assertEquals(GetResult.MISS, s.getInto("short", arena.allocate(4096)));
        assertFalse(s.exists("short"));
        assertTrue(s.exists("long"));
        s.reclaim();
        assertEquals(free - 4096, s.freeBytes());
        assertTrue(s.put("short", pattern(16, 3), PutOptions.DEFAULT.withIfAbsent(true)),
                "an expired key counts as absent");
    }

    @Test
    void ttlOptionOfTheUriAppliesToPutsWithoutOne() throws InterruptedException {
        ShmStore s = open("a", "capacity=1MiB&ttl=50ms");
        s.put("k", pattern(16, 1), PutOptions.DEFAULT);
        s.put("kept", pattern(16, 1), PutOptions.DEFAULT.withTtlMillis(60_000));
        Thread.sleep(120);
        assertFalse(s.exists("k"));
        assertTrue(s.exists("kept"));
    }

    @Test
    void keysUpTo250Utf8BytesWorkAndLongerOnesAreInvalidArguments() {
        ShmStore s = open("a", "capacity=1MiB");
        String ascii250 = "k".repeat(250);
        String twoByte250 = "é".repeat(125);
        String threeByte252 = "€".repeat(84);
        String emoji = "😀".repeat(62) + "ab";
        for (String k : List.of(ascii250, twoByte250, emoji, "naïve/κλειδί/鍵")) {
            assertTrue(s.put(k, pattern(16, k.hashCode()), PutOptions.DEFAULT), k);
        }
        for (String k : List.of(ascii250, twoByte250, emoji, "naïve/κλειδί/鍵")) {
            MemorySegment dst = arena.allocate(16);
            assertEquals(16, s.getInto(k, dst), k);
            assertEquals(k.hashCode(), ValuePattern.seed(dst));
        }
        assertFalse(s.exists("é".repeat(124)), "a prefix is another key");
        KVException e = assertKv(ErrorCode.INVALID_ARGUMENT, () -> s.put("k".repeat(251), pattern(16, 1),
                PutOptions.DEFAULT));
        assertTrue(e.getMessage().contains("250"), e.getMessage());
        assertKv(ErrorCode.INVALID_ARGUMENT, () -> s.getInto(threeByte252, arena.allocate(16)));
        assertKv(ErrorCode.INVALID_ARGUMENT, () -> s.size(null));
    }

    @Test
    void emptyValuesRoundTrip() {
        ShmStore s = open("a", "capacity=1MiB");
        assertTrue(s.put("empty", MemorySegment.NULL, PutOptions.DEFAULT));
        assertEquals(0, s.getInto("empty", MemorySegment.NULL));
        assertEquals(0, s.size("empty"));
        assertEquals(1 << 20, s.freeBytes());
    }

    @Test
    void valueLargerThanCapacityIsValueTooLarge() {
        ShmStore s = open("a", "capacity=64KiB");
        KVException e = assertKv(ErrorCode.VALUE_TOO_LARGE, () -> s.put("k", arena.allocate(65537),
                PutOptions.DEFAULT));
        assertTrue(e.getMessage().contains("65537") && e.getMessage().contains("65536"), e.getMessage());
    }

    @Test
    void evictionKeepsTheStoreWithinCapacityAndTheNewestValuesReadable() {
        ShmStore s = open("a", "capacity=1MiB&block=4KiB&entries=64");
        MemorySegment dst = arena.allocate(64 << 10);
        for (int i = 0; i < 200; i++) {
            assertTrue(s.put("k" + i, pattern(60_000, i), PutOptions.DEFAULT));
            assertTrue(s.freeBytes() >= 0);
            assertEquals(60_000, s.getInto("k" + i, dst), "the value just put is readable");
            assertEquals(i, ValuePattern.seed(dst));
        }
        assertTrue(s.liveEntries() <= 17, "1 MiB holds 17 values of 15 blocks of 4 KiB: " + s.liveEntries());
        assertTrue(s.liveEntries() >= 8, "eviction frees only what it must: " + s.liveEntries());
        for (int i = 0; i < 200; i++) {
            long r = s.getInto("k" + i, dst);
            assertTrue(GetResult.isMiss(r) || r == 60_000 && ValuePattern.seed(dst) == i && ValuePattern.verify(dst,
                    r) == null);
        }
    }

    @Test
    void evictionRefuseFailsPutsWithStoreFullAndKeepsEveryEntry() throws InterruptedException {
        ShmStore s = open("a", "capacity=64KiB&block=4KiB&eviction=refuse");
        for (int i = 0; i < 15; i++) {
            assertTrue(s.put("k" + i, pattern(4096, i), PutOptions.DEFAULT));
        }
        assertTrue(s.put("short", pattern(4096, 15), PutOptions.DEFAULT.withTtlMillis(300)));
        KVException e = assertKv(ErrorCode.STORE_FULL, () -> s.put("more", pattern(8192, 99), PutOptions.DEFAULT));
        assertTrue(e.getMessage().contains("eviction=refuse"), e.getMessage());
        for (int i = 0; i < 15; i++) {
            assertTrue(s.exists("k" + i), "k" + i);
        }
        assertTrue(s.remove("k1"));
        assertTrue(s.put("one-block", pattern(4096, 100), PutOptions.DEFAULT), "removal makes room");
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (s.exists("short") && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertTrue(s.put("after-ttl", pattern(4096, 101), PutOptions.DEFAULT), "expired entries are reclaimed");
        assertKv(ErrorCode.INVALID_URI, () -> open("b", "eviction=fifo"));
    }

    @Test
    void entryTableLimitEvictsToo() {
        ShmStore s = open("a", "capacity=1MiB&entries=16");
        for (int i = 0; i < 100; i++) {
            assertTrue(s.put("k" + i, pattern(16, i), PutOptions.DEFAULT));
        }
        assertEquals(16, s.liveEntries());
        assertTrue(s.exists("k99"));
    }

    @Test
    void recentlyReadEntriesGetASecondChance() {
        ShmStore s = open("a", "capacity=64KiB&block=4KiB&entries=16");
        for (int i = 0; i < 16; i++) {
            s.put("k" + i, pattern(4096, i), PutOptions.DEFAULT);
        }
        MemorySegment dst = arena.allocate(4096);
        assertEquals(4096, s.getInto("k0", dst));
        s.put("new", pattern(4096, 99), PutOptions.DEFAULT);
        assertTrue(s.exists("k0"), "k0 was read, so CLOCK passed over it");
        assertFalse(s.exists("k1"), "k1 was the oldest unread entry");
    }

    @Test
    void theIndexStaysCorrectThroughThousandsOfInsertsAndRemovals() {
        ShmStore s = open("a", "capacity=1MiB&entries=16");
        for (int i = 0; i < 5000; i++) {
            assertTrue(s.put("k" + i, pattern(16, i), PutOptions.DEFAULT));
            if (i % 4 != 0) {
                assertTrue(s.remove("k" + i), "k" + i);
            }
        }
        MemorySegment dst = arena.allocate(16);
        int found = 0;
        for (int i = 0; i < 5000; i += 4) {
            long r = s.getInto("k" + i, dst);
            if (GetResult.isHit(r)) {
                found++;
                assertEquals(i, ValuePattern.seed(dst));
            }
        }
        // Each short-lived key took an entry from a full table, evicting the oldest kept key, and then left.
        assertEquals(15, found);
        assertEquals(15, s.liveEntries());
        for (int i = 4996; i >= 4940; i -= 4) {
            assertTrue(s.exists("k" + i), "k" + i + " is among the newest");
        }
    }

    @Test
    void closeIsIdempotentAndLaterCallsFailWithClosed() {
        ShmStore s = open("a", "capacity=1MiB");
        s.put("k", pattern(16, 1), PutOptions.DEFAULT);
        s.close();
        s.close();
        assertKv(ErrorCode.CLOSED, () -> s.getInto("k", arena.allocate(16)));
        assertKv(ErrorCode.CLOSED, () -> s.put("k", pattern(16, 1), PutOptions.DEFAULT));
        assertKv(ErrorCode.CLOSED, () -> s.remove("k"));
        assertKv(ErrorCode.CLOSED, () -> s.size("k"));
        assertKv(ErrorCode.CLOSED, s::healthCheck);
        assertKv(ErrorCode.CLOSED, s::freeBytes);
    }

    @Test
    void valuesOutliveTheStoreThatWroteThemAndAreSharedBetweenInstances() {
        ShmStore first = open("a", "capacity=1MiB");
        ShmStore second = open("a", "");
        first.put("k", pattern(8000, 5), PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(8000);
        assertEquals(8000, second.getInto("k", dst));
        first.close();
        second.close();
        ShmStore third = open("a", "capacity=1MiB");
        assertEquals(8000, third.getInto("k", dst));
        assertEquals(5, ValuePattern.seed(dst));
        assertTrue(third.healthCheck().contains("bytes free"), third.healthCheck());
    }

    @Test
    void theFileIsCreatedWithMode0600() throws IOException {
        ShmStore s = open("a", "capacity=1MiB");
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(s.path())));
        try (var names = Files.list(dir)) {
            assertEquals(List.of(s.path()), names.toList(), "no temporary file is left behind");
        }
    }

    @Test
    void providerOpensTheShmScheme() {
        ShmStoreProvider p = new ShmStoreProvider();
        assertEquals(Set.of("shm"), p.schemes());
        try (KVStore s = p.open(StoreUri.parse("shm:/p?capacity=1MiB&dir=" + dir))) {
            assertTrue(s.put("k", pattern(16, 1), PutOptions.DEFAULT));
            assertTrue(s.uri().startsWith("shm:/p"));
        }
    }

    @Test
    void badUrisAreRefusedWithTheOptionNamed() {
        KVException typo = assertKv(ErrorCode.INVALID_URI, () -> open("a", "capacty=1MiB"));
        assertTrue(typo.getMessage().contains("capacty"), typo.getMessage());
        assertKv(ErrorCode.INVALID_URI, () -> open("../etc", "capacity=1MiB"));
        assertKv(ErrorCode.INVALID_URI, () -> ShmStore.open(StoreUri.parse("shm:?dir=" + dir)));
        assertKv(ErrorCode.INVALID_URI, () -> open("a", "capacity=1MiB&block=3000"));
        assertKv(ErrorCode.INVALID_URI, () -> open("a", "capacity=10"));
        assertKv(ErrorCode.INVALID_CONFIG, () -> ShmStore.open(StoreUri.parse("shm:/a?dir=" + dir + "/missing")));
        KVException host = assertKv(ErrorCode.INVALID_URI, () -> ShmStore.open(StoreUri.parse("shm://h/a?dir="
                + dir)));
        assertTrue(host.getMessage().contains("no host"), host.getMessage());
        KVException creds = assertKv(ErrorCode.INVALID_URI, () -> ShmStore.open(StoreUri.parse("shm://u:S3CRET@/a"
                + "?dir=" + dir)));
        assertTrue(!creds.getMessage().contains("S3CRET"), creds.getMessage());
    }

    @Test
    void aUriWhoseSizesDifferFromTheFileIsRefused() {
        open("a", "capacity=1MiB");
        KVException e = assertKv(ErrorCode.INVALID_CONFIG, () -> open("a", "capacity=2MiB"));
        assertTrue(e.getMessage().contains("capacity=1048576") && e.getMessage().contains("2097152"), e.getMessage());
        assertKv(ErrorCode.INVALID_CONFIG, () -> open("a", "block=8KiB"));
    }

    @Test
    void aFileWithWrongMagicIsRefusedNamingThePathAndTheFix() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        poke(p, ShmLayout.H_MAGIC, 0x1234L);
        KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
        assertTrue(e.getMessage().contains(p.toString()) && e.getMessage().contains("magic")
                && e.hint().contains("delete " + p), e.getMessage());
    }

    @Test
    void aFileOfAnotherFormatVersionIsRefused() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        pokeInt(p, ShmLayout.H_VERSION, 99);
        KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
        assertTrue(e.getMessage().contains("version 99"), e.getMessage());
        assertTrue(e.getMessage().contains(p.toString()) && e.getMessage().contains("reads version "
                + ShmLayout.VERSION), e.getMessage());
        pokeInt(p, ShmLayout.H_VERSION, ShmLayout.VERSION);
        pokeInt(p, ShmLayout.H_PROC_SLOTS, 32);
        KVException layout = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
        assertTrue(layout.getMessage().contains(p.toString()) && layout.getMessage().contains("32 process slots"),
                layout.getMessage());
    }

    @Test
    void aFileTruncatedUnderARunningStoreIsCorruptNamingTheFileAndKeepsTheValuesBeforeTheCut() throws IOException {
        ShmStore s = open("a", "capacity=1MiB&entries=1024");
        s.put("low", pattern(4096, 1), PutOptions.DEFAULT);
        s.put("high", pattern(512 << 10, 2), PutOptions.DEFAULT);
        StoreView held = s.newView();
        assertEquals(512 << 10, s.tryView("high", held));
        assertTrue(s.healthCheck().contains("answered"));
        ShmLayout lay = ShmLayout.of(1 << 20, 4096, 1024);
        long cut = lay.payloadOffset() + (64 << 10);
        truncate(s.path(), cut);
        String named = s.path() + " is " + cut + " bytes, but this store mapped it at " + lay.fileSize()
                + " bytes: another process truncated or replaced it";

        KVException health = assertKv(ErrorCode.CORRUPT_OBJECT, s::healthCheck);
        assertTrue(health.getMessage().contains(named) && health.hint().contains("delete it"), health.getMessage());
        MemorySegment dst = arena.allocate(512 << 10, 8);
        StoreClaim claim = s.newClaim();
        for (org.junit.jupiter.api.function.Executable call : List.<org.junit.jupiter.api.function.Executable>of(
                () -> s.getInto("high", dst), () -> s.tryView("high", s.newView()), held::segment,
                () -> s.put("new", pattern(100 << 10, 3), PutOptions.DEFAULT),
                () -> s.put("small", pattern(16, 4), PutOptions.DEFAULT),
                () -> s.tryClaim("new", 4096, PutOptions.DEFAULT, claim), () -> s.size("high"),
                () -> s.exists("high"))) {
            KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, call);
            assertTrue(e.getMessage().contains(named), e.getMessage());
        }
        held.release();
        assertEquals(4096, s.getInto("low", dst), "a value before the cut is still there");
        assertNull(ValuePattern.verify(dst, 4096));
        assertEquals(1, ValuePattern.seed(dst));
        assertEquals(4096, s.size("low"));
        assertTrue(s.remove("high"), "a value the cut took can be removed");
        assertEquals(0, s.leasesHeld());
    }

    @Test
    void aFileTruncatedIntoItsTablesFailsEveryCallNamingTheFileAndTheCloseTouchesNothing() throws IOException {
        ShmStore s = open("a", "capacity=1MiB&entries=1024");
        s.put("k", pattern(4096, 1), PutOptions.DEFAULT);
        StoreView view = s.newView();
        assertEquals(4096, s.tryView("k", view));
        StoreClaim claim = s.newClaim();
        assertEquals(ClaimResult.CLAIMED, s.tryClaim("c", 4096, PutOptions.DEFAULT, claim));
        truncate(s.path(), 0);
        String named = s.path() + " is 0 bytes, but this store mapped it at";
        MemorySegment dst = arena.allocate(4096);
        for (org.junit.jupiter.api.function.Executable call : List.<org.junit.jupiter.api.function.Executable>of(
                () -> s.getInto("k", dst), () -> s.size("k"), () -> s.exists("k"), () -> s.remove("k"),
                () -> s.put("k", pattern(16, 2), PutOptions.DEFAULT), s::healthCheck, s::freeBytes, s::liveEntries,
                s::reclaim, s::newClaim, s::newView, view::segment, claim::segment, claim::commit,
                () -> s.subscribe(event -> { }, (what, e) -> { }))) {
            KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, call);
            assertTrue(e.getMessage().contains(named) && e.getMessage().contains("tables are lost"), e.getMessage());
        }
        view.release();
        claim.abort();
        s.close();
        assertKv(ErrorCode.CLOSED, () -> s.getInto("k", dst));
    }

    private static void truncate(Path file, long size) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ch.truncate(size);
        }
    }

    @Test
    void aFileOfAnotherVersionRefusedAtOpenIsLeftUntouchedAndOpensOnceItsVersionIsRight() throws IOException {
        ShmStore first = open("a", "capacity=1MiB");
        for (int i = 0; i < 8; i++) {
            first.put("k" + i, pattern(4096 + 8 * i, i), PutOptions.DEFAULT);
        }
        Path p = first.path();
        closeAll();
        pokeInt(p, ShmLayout.H_VERSION, ShmLayout.VERSION + 1);
        byte[] before = Files.readAllBytes(p);
        for (int attempt = 0; attempt < 2; attempt++) {
            KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
            assertTrue(e.getMessage().contains("format version " + (ShmLayout.VERSION + 1))
                    && e.getMessage().contains(p.toString()), e.getMessage());
        }
        assertTrue(java.util.Arrays.equals(before, Files.readAllBytes(p)), "a refused open changed the file");

        pokeInt(p, ShmLayout.H_VERSION, ShmLayout.VERSION);
        ShmStore again = open("a", "");
        assertEquals(8, again.liveEntries());
        for (int i = 0; i < 8; i++) {
            MemorySegment dst = arena.allocate(4096 + 8 * i);
            assertEquals(4096 + 8 * i, again.getInto("k" + i, dst), "k" + i);
            assertNull(ValuePattern.verify(dst, 4096 + 8 * i));
            assertEquals(i, ValuePattern.seed(dst));
        }
    }

    @Test
    void headerSizesThatDisagreeWithEachOtherAreRefused() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        poke(p, ShmLayout.H_PAYLOAD_OFFSET, 4096);
        KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
        assertTrue(e.getMessage().contains("payload offset 4096"), e.getMessage());
        poke(p, ShmLayout.H_ENTRY_COUNT, Long.MAX_VALUE);
        assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
    }

    @Test
    void aHeaderNamingAnotherCreatorOrPidNamespaceIsRefused() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        poke(p, ShmLayout.H_CREATOR_UID, 4242);
        KVException owner = assertKv(ErrorCode.AUTH_FAILED, () -> open("a", ""));
        assertTrue(owner.getMessage().contains("uid 4242"), owner.getMessage());
        poke(p, ShmLayout.H_CREATOR_UID, Long.parseLong(uid()));
        poke(p, ShmLayout.H_PID_NAMESPACE, 17);
        KVException ns = assertKv(ErrorCode.INVALID_CONFIG, () -> open("a", ""));
        assertTrue(ns.getMessage().contains("pid namespace 17"), ns.getMessage());
    }

    @Test
    void aTruncatedFileIsRefused() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
            ch.truncate(ch.size() / 2);
        }
        KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
        assertTrue(e.getMessage().contains("truncated"), e.getMessage());
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
            ch.truncate(100);
        }
        assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("a", ""));
    }

    @Test
    void aFileOfAnotherUserIsRefused() throws IOException {
        assumeTrue("0".equals(uid()), "needs root to give a file to another user");
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        Files.setAttribute(p, "unix:uid", 65534);
        KVException e = assertKv(ErrorCode.AUTH_FAILED, () -> open("a", ""));
        assertTrue(e.getMessage().contains("uid 65534") && e.getMessage().contains(p.toString()), e.getMessage());
    }

    @Test
    void aFileOthersCanReadIsRefused() throws IOException {
        Path p = open("a", "capacity=1MiB").path();
        closeAll();
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rw-r--r--"));
        KVException e = assertKv(ErrorCode.AUTH_FAILED, () -> open("a", ""));
        assertTrue(e.hint().contains("chmod 600"), e.getMessage());
    }

    @Test
    void aSymbolicLinkIsNotFollowed() throws IOException {
        Path target = open("real", "capacity=1MiB").path();
        Files.createSymbolicLink(dir.resolve("link"), target);
        assertKv(ErrorCode.CORRUPT_OBJECT, () -> open("link", ""));
    }

    @Test
    void entryOffsetsOutsideThePayloadAreaAreReportedNotFollowed() {
        ShmStore s = open("a", "capacity=1MiB&entries=1024");
        s.put("k", pattern(4096, 1), PutOptions.DEFAULT);
        ShmLayout lay = ShmLayout.of(1 << 20, 4096, 1024);
        try (Arena a = Arena.ofConfined(); FileChannel ch = FileChannel.open(s.path(), StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            MemorySegment m = ch.map(FileChannel.MapMode.READ_WRITE, 0, lay.fileSize(), a);
            m.set(ValueLayout.JAVA_LONG, lay.entry(0) + ShmLayout.E_PAYLOAD_OFFSET, (1 << 20) - 4096 + 4096L);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        KVException e = assertKv(ErrorCode.CORRUPT_OBJECT, () -> s.getInto("k", arena.allocate(4096)));
        assertTrue(e.getMessage().contains("offset=1048576") && e.getMessage().contains("1048576 bytes"),
                e.getMessage());
    }

    @Test
    void concurrentThreadsNeverSeeTornValues() throws Exception {
        ShmStore s = open("a", "capacity=2MiB&entries=64");
        int keys = 24;
        AtomicLong hits = new AtomicLong();
        try (ExecutorService pool = Executors.newFixedThreadPool(6)) {
            List<Future<String>> results = new ArrayList<>();
            long end = System.nanoTime() + 1_500_000_000L;
            for (int t = 0; t < 6; t++) {
                boolean writer = t % 2 == 0;
                long seed = t;
                results.add(pool.submit(() -> {
                    SplittableRandom rnd = new SplittableRandom(seed);
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment buf = a.allocate(64 << 10, 8);
                        while (System.nanoTime() < end) {
                            String key = "key-" + rnd.nextInt(keys);
                            if (writer) {
                                long len = 16 + 8L * rnd.nextInt(8190);
                                ValuePattern.fill(buf, len, rnd.nextLong());
                                s.put(key, buf.asSlice(0, len), PutOptions.DEFAULT);
                                if (rnd.nextInt(10) == 0) {
                                    s.remove("key-" + rnd.nextInt(keys));
                                }
                            } else {
                                long r = s.getInto(key, buf);
                                if (GetResult.isHit(r)) {
                                    hits.incrementAndGet();
                                    String bad = ValuePattern.verify(buf, r);
                                    if (bad != null) {
                                        return key + ": " + bad;
                                    }
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<String> f : results) {
                assertNull(f.get());
            }
        }
        assertTrue(hits.get() > 100, "readers hit " + hits.get() + " times");
        assertEquals(0, s.leasesHeld());
        for (int i = 0; i < keys; i++) {
            s.remove("key-" + i);
        }
        s.reclaim();
        assertEquals(2 << 20, s.freeBytes(), "no block leaked");
        assertEquals(0, s.liveEntries());
    }

    @Test
    void steadyStatePutsAndGetsAllocateNothingOnTheHeap() {
        ShmStore s = open("a", "capacity=4MiB&entries=1024");
        MemorySegment v = pattern(8192, 1);
        MemorySegment dst = arena.allocate(8192);
        String[] keys = new String[64];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = "layer-" + i;
        }
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        // The least of several rounds: per-call garbage shows in every round, a one-off (a recompilation) in one.
        long allocated = Long.MAX_VALUE;
        for (int round = 0; round < 8; round++) {
            long before = mx.getThreadAllocatedBytes(tid);
            for (int i = 0; i < 20_000; i++) {
                String k = keys[i & 63];
                s.put(k, v, PutOptions.DEFAULT);
                s.getInto(k, dst);
                s.size(k);
            }
            if (round >= 3) {
                allocated = Math.min(allocated, mx.getThreadAllocatedBytes(tid) - before);
            }
        }
        assertTrue(allocated < 1024, "20000 puts, gets and sizes allocated " + allocated + " bytes after warm-up");
    }

    @Test
    void steadyStateClaimsCommitsViewsAndReleasesAllocateNothingOnTheHeap() {
        ShmStore s = open("a", "capacity=4MiB&entries=1024");
        MemorySegment v = pattern(8192, 1);
        String[] keys = new String[64];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = "layer-" + i;
        }
        StoreClaim claim = s.newClaim();
        StoreView view = s.newView();
        com.sun.management.ThreadMXBean mx =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        long allocated = Long.MAX_VALUE;
        long sum = 0;
        for (int round = 0; round < 8; round++) {
            long before = mx.getThreadAllocatedBytes(tid);
            for (int i = 0; i < 10_000; i++) {
                String k = keys[i & 63];
                // A replacing claim and a view of it, then (each eighth key) the connector's consuming drop-select.
                if (s.tryClaim(k, 8192, PutOptions.DEFAULT, claim) != ClaimResult.CLAIMED) {
                    throw new AssertionError("claim of " + k + " failed");
                }
                MemorySegment.copy(v, 0, claim.segment(), 0, 8192);
                claim.commit();
                if (s.tryView(k, view) != 8192) {
                    throw new AssertionError("view of " + k + " missed");
                }
                sum += view.segment().get(ValueLayout.JAVA_LONG, 0);
                view.release();
                if ((i & 7) == 7) {
                    s.remove(k);
                }
            }
            if (round >= 3) {
                allocated = Math.min(allocated, mx.getThreadAllocatedBytes(tid) - before);
            }
        }
        assertEquals(8L * 10_000, sum, "every view read the value's first word, seed 1");
        assertTrue(allocated < 1024, "10000 claims, commits, views and releases allocated " + allocated
                + " bytes after warm-up");
    }

    private void closeAll() {
        opened.forEach(ShmStore::close);
        opened.clear();
    }

    private static String uid() {
        try {
            return String.valueOf(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static void poke(Path p, long offset, long value) throws IOException {
        try (Arena a = Arena.ofConfined(); FileChannel ch = FileChannel.open(p, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.map(FileChannel.MapMode.READ_WRITE, 0, 4096, a).set(ValueLayout.JAVA_LONG, offset, value);
        }
    }

    private static void pokeInt(Path p, long offset, int value) throws IOException {
        try (Arena a = Arena.ofConfined(); FileChannel ch = FileChannel.open(p, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.map(FileChannel.MapMode.READ_WRITE, 0, 4096, a).set(ValueLayout.JAVA_INT, offset, value);
        }
    }
}
