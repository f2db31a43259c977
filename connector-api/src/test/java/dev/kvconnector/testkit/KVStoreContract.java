package dev.kvconnector.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreRead;
import dev.kvconnector.store.StoreSubscription;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every {@link KVStore} must show. A backend proves itself by extending this class and implementing
 * {@link #openStore()}; the suite opens a fresh store per test and closes it after. Keys carry a random prefix per
 * test, so stores backed by a long-running server need no cleaning between tests.
 *
 * <p>Cases for an optional capability ({@link StoreCapability#REMOVE}, {@link StoreCapability#CLAIM},
 * {@link StoreCapability#VIEW}, {@link StoreCapability#EVENTS}) run when the store declares it and are skipped
 * otherwise; a store that lacks {@code REMOVE} must refuse removes with {@code UNSUPPORTED}, and one that lacks
 * {@code CLAIM}, {@code VIEW} or {@code EVENTS} must refuse those calls the same way.
 */
public abstract class KVStoreContract {
    /** The store under test. */
    protected KVStore store;
    /** Memory for the test's values, freed after each test. */
    protected Arena arena;
    private String prefix;

    /** Opens a new store for one test. */
    protected abstract KVStore openStore();

    /** The size of the large-value test, in bytes; override for slow stores. */
    protected long largeValueBytes() {
        return 8L << 20;
    }

    /** Whether a put on an existing key replaces the value (true for every store kvconnector ships). */
    protected boolean putReplaces() {
        return true;
    }

    @BeforeEach
    void openStoreForTest() {
        arena = Arena.ofShared();
        store = openStore();
        prefix = "kvct:" + UUID.randomUUID() + ":";
    }

    @AfterEach
    void closeStoreAfterTest() {
        try {
            if (store != null) {
                store.close();
            }
        } finally {
            arena.close();
        }
    }

    /** A key unique to this test. */
    protected String key(String name) {
        return prefix + name;
    }

    @Test
    void putThenGetIntoCopiesExactBytesAndReturnsSize() {
        MemorySegment v = Segments.random(arena, 10_000, 1);
        assertTrue(store.put(key("a"), v, PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(16_384);
        long r = store.getInto(key("a"), dst);
        assertEquals(10_000, r, GetResult.describe(r));
        assertTrue(Segments.equal(v, dst, 10_000));
    }

    @Test
    void getIntoReturnsMissForAbsentKey() {
        long r = store.getInto(key("never-put"), arena.allocate(64));
        assertTrue(GetResult.isMiss(r), GetResult.describe(r));
        assertEquals(-1, store.size(key("never-put")));
        assertFalse(store.exists(key("never-put")));
    }

    @Test
    void getIntoReturnsTooSmallWithRealSizeAndCopiesNothing() {
        store.put(key("big"), Segments.random(arena, 5000, 2), PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(4999);
        dst.fill((byte) 0x5A);
        long r = store.getInto(key("big"), dst);
        assertTrue(GetResult.isTooSmall(r), GetResult.describe(r));
        assertEquals(5000, GetResult.requiredSize(r));
        for (long i = 0; i < dst.byteSize(); i++) {
            assertEquals((byte) 0x5A, dst.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " was overwritten");
        }
        assertEquals(5000, store.getInto(key("big"), arena.allocate(5000)));
    }

    @Test
    void putReplacesAnExistingValue() {
        assumeTrue(putReplaces(), "this store keeps the first value");
        store.put(key("r"), Segments.random(arena, 100, 3), PutOptions.DEFAULT);
        MemorySegment second = Segments.random(arena, 70, 4);
        assertTrue(store.put(key("r"), second, PutOptions.DEFAULT));
        MemorySegment dst = arena.allocate(100);
        assertEquals(70, store.getInto(key("r"), dst));
        assertTrue(Segments.equal(second, dst, 70));
    }

    @Test
    void ifAbsentPutKeepsTheExistingValueAndReturnsFalse() {
        MemorySegment first = Segments.random(arena, 64, 5);
        assertTrue(store.put(key("once"), first, PutOptions.DEFAULT.withIfAbsent(true)));
        assertFalse(store.put(key("once"), Segments.random(arena, 64, 6), PutOptions.DEFAULT.withIfAbsent(true)));
        MemorySegment dst = arena.allocate(64);
        assertEquals(64, store.getInto(key("once"), dst));
        assertTrue(Segments.equal(first, dst, 64));
    }

    @Test
    void sizeAndExistsReflectPresence() {
        store.put(key("s"), Segments.random(arena, 1234, 7), PutOptions.DEFAULT);
        assertEquals(1234, store.size(key("s")));
        assertTrue(store.exists(key("s")));
    }

    /** Whether the store under test declares {@code c}. */
    protected boolean declares(StoreCapability c) {
        return store.capabilities().contains(c);
    }

    @Test
    void removeReturnsWhetherTheKeyExisted() {
        assumeTrue(declares(StoreCapability.REMOVE), "the store does not declare REMOVE");
        store.put(key("rm"), Segments.random(arena, 10, 8), PutOptions.DEFAULT);
        assertTrue(store.remove(key("rm")));
        assertFalse(store.exists(key("rm")));
        assertTrue(GetResult.isMiss(store.getInto(key("rm"), arena.allocate(10))));
        assertFalse(store.remove(key("rm")));
    }

    @Test
    void aPipelinedReadIsAnsweredAtItsAwaitAndTheHandleServesBatchAfterBatch() {
        assumeTrue(declares(StoreCapability.PIPELINED_READ), "the store does not declare PIPELINED_READ");
        MemorySegment a = Segments.random(arena, 70_000, 31);
        MemorySegment b = Segments.random(arena, 100, 32);
        store.put(key("ra"), a, PutOptions.DEFAULT);
        store.put(key("rb"), b, PutOptions.DEFAULT);
        StoreRead read = store.newRead();
        MemorySegment[] dsts = {arena.allocate(70_000), arena.allocate(50), arena.allocate(10)};
        long[] results = new long[3];
        assertFalse(read.isPending());

        for (int round = 0; round < 2; round++) {
            store.sendGetIntoBatch(new String[] {key("ra"), key("rb"), key("absent")}, dsts, 3, read);
            assertTrue(read.isPending());
            KVException twice = assertThrows(KVException.class,
                    () -> store.sendGetIntoBatch(new String[] {key("ra")}, dsts, 1, read));
            assertEquals(ErrorCode.INVALID_ARGUMENT, twice.code(), "a second batch on a pending handle");
            read.await(results);

            assertFalse(read.isPending());
            assertEquals(70_000, results[0]);
            assertTrue(Segments.equal(a, dsts[0], 70_000));
            assertEquals(100, GetResult.requiredSize(results[1]), "100 bytes into 50");
            assertTrue(GetResult.isMiss(results[2]));
        }
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> read.await(results)).code(),
                "an await with nothing sent");
        assertEquals(1, store.getInto(key("rb"), arena.allocate(100)) / 100, "the store serves other calls after");
    }

    @Test
    void emptyValueRoundTrips() {
        assertTrue(store.put(key("empty"), arena.allocate(0), PutOptions.DEFAULT));
        assertEquals(0, store.size(key("empty")));
        assertEquals(0, store.getInto(key("empty"), arena.allocate(8)));
    }

    @Test
    void largeValueRoundTrips() {
        long n = largeValueBytes();
        MemorySegment v = Segments.random(arena, n, 9);
        store.put(key("large"), v, PutOptions.DEFAULT);
        MemorySegment dst = arena.allocate(n);
        assertEquals(n, store.getInto(key("large"), dst));
        assertTrue(Segments.equal(v, dst, n));
    }

    @Test
    void keysWithPunctuationAndUnicodeAreDistinct() {
        String[] names = {"{tag}:L0", "a b", "model@1@0@abc", "路径/键", "x:y:z"};
        for (int i = 0; i < names.length; i++) {
            store.put(key(names[i]), Segments.random(arena, 16 + i, 100 + i), PutOptions.DEFAULT);
        }
        for (int i = 0; i < names.length; i++) {
            assertEquals(16 + i, store.size(key(names[i])), names[i]);
        }
    }

    @Test
    void ttlExpiresEntries() throws InterruptedException {
        assumeTrue(store.capabilities().contains(StoreCapability.NATIVE_TTL), "store has no TTL");
        store.put(key("ttl"), Segments.random(arena, 32, 10), PutOptions.DEFAULT.withTtlMillis(150));
        store.put(key("keep"), Segments.random(arena, 32, 11), PutOptions.DEFAULT);
        assertTrue(store.exists(key("ttl")));
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (store.exists(key("ttl")) && System.nanoTime() < deadline) {
            Thread.sleep(25);
        }
        assertFalse(store.exists(key("ttl")), "entry outlived its 150 ms TTL by 5 s");
        assertTrue(GetResult.isMiss(store.getInto(key("ttl"), arena.allocate(32))));
        assertTrue(store.exists(key("keep")));
    }

    @Test
    void removeWithoutTheRemoveCapabilityIsUnsupportedAndKeepsTheKey() {
        assumeTrue(!declares(StoreCapability.REMOVE), "the store declares REMOVE");
        store.put(key("keep"), Segments.random(arena, 10, 8), PutOptions.DEFAULT);
        assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, () -> store.remove(key("keep"))).code());
        assertTrue(store.exists(key("keep")));
    }

    @Test
    void claimViewAndPipelinedReadsWithoutTheCapabilityAreUnsupported() {
        if (!declares(StoreCapability.CLAIM)) {
            assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, store::newClaim).code());
        }
        if (!declares(StoreCapability.VIEW)) {
            assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, store::newView).code());
        }
        if (!declares(StoreCapability.PIPELINED_READ)) {
            assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class, store::newRead).code());
        }
    }

    @Test
    void eventsTellThatAKeyWasStoredThenThatItLeftTheStore() throws InterruptedException {
        assumeTrue(declares(StoreCapability.EVENTS), "the store does not declare EVENTS");
        LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        String k = key("ev");
        try (StoreSubscription s = store.subscribe(events::add, (where, f) -> failures.add(f))) {
            store.put(k, Segments.random(arena, 100, 9), PutOptions.DEFAULT);
            assertTrue(store.remove(k));
            List<StoreEvent> mine = new ArrayList<>();
            StoreEvent e;
            do {
                e = events.poll(10, TimeUnit.SECONDS);
                assertTrue(e != null, "no removal of " + k + " naming " + store.uri() + " within 10 s; got " + mine);
                if (e.key().equals(k)) {
                    mine.add(e);
                }
            } while (!e.key().equals(k) || e.type() != StoreEvent.Type.REMOVED || !e.storeUri().equals(store.uri()));
            // A store of parts (tiered:) may tell a store only where a part tells it; told, it comes first.
            assertTrue(mine.get(0).type() == StoreEvent.Type.STORED || mine.size() == 1, mine.toString());
            for (StoreEvent told : mine) {
                assertTrue(told.type() != StoreEvent.Type.STORED || told.bytes() == 100 || told.bytes() == -1,
                        mine.toString());
            }
            for (int i = 1; i < mine.size(); i++) {
                assertTrue(mine.get(i).sequence() > mine.get(i - 1).sequence(), mine.toString());
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void subscribeWithoutTheEventsCapabilityIsUnsupported() {
        assumeTrue(!declares(StoreCapability.EVENTS), "the store declares EVENTS");
        assertEquals(ErrorCode.UNSUPPORTED, assertThrows(KVException.class,
                () -> store.subscribe(e -> { }, ErrorHandler.LOGGING)).code());
    }

    @Test
    void batchPutGetAndRemoveHandleEveryKey() {
        assumeTrue(declares(StoreCapability.REMOVE), "the store does not declare REMOVE");
        int n = 6;
        String[] keys = new String[n];
        MemorySegment[] values = new MemorySegment[n];
        MemorySegment[] dsts = new MemorySegment[n];
        for (int i = 0; i < n; i++) {
            keys[i] = key("b" + i);
            values[i] = Segments.random(arena, 100 * (i + 1), 20 + i);
            dsts[i] = arena.allocate(100 * (i + 1));
        }
        boolean[] stored = new boolean[n];
        store.putBatch(keys, values, n, PutOptions.DEFAULT, stored);
        for (boolean s : stored) {
            assertTrue(s);
        }
        keys[n - 1] = key("absent");
        long[] results = new long[n];
        store.getIntoBatch(keys, dsts, n, results);
        for (int i = 0; i < n - 1; i++) {
            assertEquals(100L * (i + 1), results[i]);
            assertTrue(Segments.equal(values[i], dsts[i], results[i]));
        }
        assertTrue(GetResult.isMiss(results[n - 1]));
        assertEquals(n - 1, store.removeBatch(keys, n));
        assertFalse(store.exists(keys[0]));
    }

    @Test
    void aStoreKeyNamesTheSameObjectAsItsString() {
        StoreKey k = new StoreKey();
        for (String name : new String[] {"sk-ascii", "sk-üñï-\u4e2d", "sk-{tag}:L7"}) {
            MemorySegment v = Segments.random(arena, 3_000, name.hashCode());
            MemorySegment w = Segments.random(arena, 2_000, name.hashCode() + 1);
            MemorySegment dst = arena.allocate(4_096);
            assertTrue(store.put(key(name), v, PutOptions.DEFAULT));
            assertEquals(3_000, store.getInto(k.set(key(name)), dst), "a StoreKey reads what its string put");
            assertTrue(Segments.equal(v, dst, 3_000));
            assertTrue(store.put(k.set(key(name + "-b")), w, PutOptions.DEFAULT));
            assertEquals(2_000, store.getInto(key(name + "-b"), dst), "a string reads what its StoreKey put");
            assertTrue(Segments.equal(w, dst, 2_000));
        }
        assertTrue(GetResult.isMiss(store.getInto(k.set(key("sk-absent")), arena.allocate(16))));
    }

    @Test
    void storeKeyBatchesPutGetAndConsumeEveryKey() {
        int n = 5;
        StoreKey[] keys = new StoreKey[n];
        MemorySegment[] values = new MemorySegment[n];
        MemorySegment[] dsts = new MemorySegment[n];
        for (int i = 0; i < n; i++) {
            keys[i] = StoreKey.of(key("skb" + i));
            values[i] = Segments.random(arena, 64 * (i + 1), 40 + i);
            dsts[i] = arena.allocate(64 * (i + 1));
        }
        boolean[] stored = new boolean[n];
        store.putBatch(keys, values, n, PutOptions.DEFAULT, stored);
        for (int i = 0; i < n; i++) {
            assertTrue(stored[i]);
            assertEquals(64L * (i + 1), store.size(key("skb" + i)), "stored under the key's string");
        }
        keys[n - 1].set(key("skb-absent"));
        long[] results = new long[n];
        store.getIntoBatch(keys, dsts, n, results);
        for (int i = 0; i < n - 1; i++) {
            assertEquals(64L * (i + 1), results[i]);
            assertTrue(Segments.equal(values[i], dsts[i], results[i]));
        }
        assertTrue(GetResult.isMiss(results[n - 1]));
        if (declares(StoreCapability.REMOVE)) {
            assertEquals(n - 1, store.removeConsumed(keys, n));
            assertFalse(store.exists(key("skb0")));
        }
    }

    @Test
    void aClaimAndAViewUnderAStoreKeyAreTheStringsToo() {
        assumeTrue(declares(StoreCapability.CLAIM) && declares(StoreCapability.VIEW),
                "the store does not declare CLAIM and VIEW");
        MemorySegment v = Segments.random(arena, 5_000, 35);
        StoreKey k = StoreKey.of(key("skc"));
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(k, v.byteSize(), PutOptions.DEFAULT, claim));
        MemorySegment.copy(v, 0, claim.segment(), 0, v.byteSize());
        k.set(key("other"));
        assertTrue(claim.commit(), "the claim keeps its own copy of the key");
        MemorySegment dst = arena.allocate(v.byteSize());
        assertEquals(v.byteSize(), store.getInto(key("skc"), dst));
        assertTrue(Segments.equal(v, dst, v.byteSize()));
        assertFalse(store.exists(key("other")));
        try (StoreView view = store.newView()) {
            assertEquals(v.byteSize(), store.tryView(k.set(key("skc")), view));
            assertTrue(Segments.equal(v, view.segment(), v.byteSize()));
        }
    }

    @Test
    void concurrentWritersAndReadersSeeOnlyWholeValues() throws Exception {
        int threads = 4;
        int keys = 8;
        long size = 64 * 1024;
        AtomicLong reads = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                fs.add(pool.submit(() -> {
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment v = a.allocate(size);
                        MemorySegment dst = a.allocate(size);
                        for (int i = 0; i < 60; i++) {
                            String k = key("c" + ThreadLocalRandom.current().nextInt(keys));
                            if ((i + id) % 2 == 0) {
                                long seed = ThreadLocalRandom.current().nextLong();
                                Segments.fill(v, seed);
                                v.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed);
                                store.put(k, v, PutOptions.DEFAULT);
                            } else {
                                long r = store.getInto(k, dst);
                                if (GetResult.isHit(r)) {
                                    assertEquals(size, r);
                                    long seed = dst.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                                    Segments.fill(v, seed);
                                    v.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed);
                                    assertTrue(Segments.equal(v, dst, size), "torn read of " + k);
                                    reads.incrementAndGet();
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(reads.get() > 0, "no read hit a value");
    }

    @Test
    void immutablePutOfTheSameValueIsStoredWhetherOrNotTheStoreExploitsIt() {
        MemorySegment v = Segments.random(arena, 3000, 30);
        PutOptions immutable = PutOptions.DEFAULT.withImmutable(true);
        assertTrue(store.put(key("imm"), v, immutable));
        assertTrue(store.put(key("imm"), v, immutable), "a repeated immutable put of the same value must be stored");
        MemorySegment dst = arena.allocate(3000);
        assertEquals(3000, store.getInto(key("imm"), dst));
        assertTrue(Segments.equal(v, dst, 3000));
    }

    @Test
    void claimIsInvisibleUntilCommitThenReadsBackExactly() {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        MemorySegment v = Segments.random(arena, 100_000, 31);
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(key("c"), v.byteSize(), PutOptions.DEFAULT, claim));
        assertEquals(v.byteSize(), claim.segment().byteSize());
        MemorySegment.copy(v, 0, claim.segment(), 0, v.byteSize());
        assertTrue(GetResult.isMiss(store.getInto(key("c"), arena.allocate(v.byteSize()))),
                "a claimed value was visible before its commit");
        assertTrue(claim.commit());
        assertFalse(claim.isClaimed());
        MemorySegment dst = arena.allocate(v.byteSize());
        assertEquals(v.byteSize(), store.getInto(key("c"), dst));
        assertTrue(Segments.equal(v, dst, v.byteSize()));
    }

    @Test
    void claimAbortIsNeverVisibleAndReturnsItsSpace() {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        StoreClaim claim = store.newClaim();
        long bytes = largeValueBytes();
        // Far more bytes than any test store holds: only returned space lets every claim succeed.
        for (int i = 0; i < 64; i++) {
            assertEquals(ClaimResult.CLAIMED, store.tryClaim(key("abort"), bytes, PutOptions.DEFAULT, claim),
                    "claim " + i + " found no room: aborted claims kept their space");
            claim.segment().fill((byte) i);
            claim.abort();
            claim.abort();
            assertFalse(store.exists(key("abort")), "an aborted claim became visible");
        }
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, claim::commit).code());
    }

    @Test
    void claimOfAWriterThatClosesTheStoreIsNeverVisible() {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(key("dies"), 4096, PutOptions.DEFAULT, claim));
        MemorySegment seg = claim.segment();
        seg.fill((byte) 7);
        store.close();
        assertThrows(IllegalStateException.class, () -> seg.fill((byte) 8),
                "the claim's segment stayed writable after the store closed");
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, claim::commit).code());
        claim.abort();
        store = openStore();
        assertFalse(store.exists(key("dies")), "a claim that was never committed became visible");
    }

    @Test
    void ifAbsentClaimOfALiveKeyReturnsExistsAndReservesNothing() {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        MemorySegment v = Segments.random(arena, 500, 32);
        store.put(key("live"), v, PutOptions.DEFAULT);
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.EXISTS, store.tryClaim(key("live"), 500, PutOptions.DEFAULT.withIfAbsent(true),
                claim));
        assertFalse(claim.isClaimed());
        MemorySegment dst = arena.allocate(500);
        assertEquals(500, store.getInto(key("live"), dst));
        assertTrue(Segments.equal(v, dst, 500));
    }

    @Test
    void aHandleHoldingAClaimRefusesASecondClaim() {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        StoreClaim claim = store.newClaim();
        assertEquals(ClaimResult.CLAIMED, store.tryClaim(key("one"), 64, PutOptions.DEFAULT, claim));
        KVException e = assertThrows(KVException.class,
                () -> store.tryClaim(key("two"), 64, PutOptions.DEFAULT, claim));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        claim.abort();
    }

    @Test
    void concurrentClaimsEachPublishTheirOwnBytes() throws Exception {
        assumeTrue(declares(StoreCapability.CLAIM), "the store does not declare CLAIM");
        int threads = 4;
        int perThread = 50;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                done.add(pool.submit(() -> {
                    StoreClaim claim = store.newClaim();
                    for (int i = 0; i < perThread; i++) {
                        long bytes = 1000 + 97L * i;
                        assertEquals(ClaimResult.CLAIMED, store.tryClaim(key("cc" + id + ":" + i), bytes,
                                PutOptions.DEFAULT, claim));
                        claim.segment().fill((byte) (id * perThread + i));
                        assertTrue(claim.commit());
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        for (int t = 0; t < threads; t++) {
            for (int i = 0; i < perThread; i++) {
                long bytes = 1000 + 97L * i;
                MemorySegment dst = arena.allocate(bytes);
                assertEquals(bytes, store.getInto(key("cc" + t + ":" + i), dst));
                byte want = (byte) (t * perThread + i);
                for (long b = 0; b < bytes; b++) {
                    if (dst.get(ValueLayout.JAVA_BYTE, b) != want) {
                        throw new AssertionError("claim " + t + ":" + i + " holds another claim's byte at " + b);
                    }
                }
            }
        }
    }

    @Test
    void viewReadsTheStoredBytesInPlaceAndIsReadOnly() {
        assumeTrue(declares(StoreCapability.VIEW), "the store does not declare VIEW");
        MemorySegment v = Segments.random(arena, 70_000, 33);
        store.put(key("v"), v, PutOptions.DEFAULT);
        try (StoreView view = store.newView()) {
            assertEquals(v.byteSize(), store.tryView(key("v"), view));
            assertTrue(view.isHeld());
            assertEquals(v.byteSize(), view.segment().byteSize());
            assertTrue(Segments.equal(v, view.segment(), v.byteSize()));
            assertTrue(view.segment().isReadOnly());
            assertThrows(IllegalArgumentException.class, () -> view.segment().fill((byte) 0),
                    "a view's segment must be read-only");
        }
    }

    @Test
    void viewOfAnAbsentKeyIsAMissAndLeavesTheHandleEmpty() {
        assumeTrue(declares(StoreCapability.VIEW), "the store does not declare VIEW");
        StoreView view = store.newView();
        assertTrue(GetResult.isMiss(store.tryView(key("none"), view)));
        assertFalse(view.isHeld());
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, view::segment).code());
    }

    @Test
    void viewKeepsItsBytesThroughRemoveAndReplaceUntilReleased() {
        assumeTrue(declares(StoreCapability.VIEW) && declares(StoreCapability.REMOVE),
                "the store does not declare VIEW and REMOVE");
        MemorySegment v = Segments.random(arena, 200_000, 34);
        store.put(key("held"), v, PutOptions.DEFAULT);
        StoreView view = store.newView();
        assertEquals(v.byteSize(), store.tryView(key("held"), view));
        store.put(key("held"), Segments.random(arena, 200_000, 35), PutOptions.DEFAULT);
        assertTrue(store.remove(key("held")));
        // Reuse of freed memory would overwrite the viewed bytes: put enough to take any freed block.
        for (int i = 0; i < 4; i++) {
            store.put(key("other" + i), Segments.random(arena, 200_000, 40 + i), PutOptions.DEFAULT);
        }
        assertTrue(Segments.equal(v, view.segment(), v.byteSize()), "a held view's bytes changed");
        view.release();
        assertFalse(view.isHeld());
    }

    @Test
    void viewReleasedTwiceIsAClearErrorAndCloseIsIdempotent() {
        assumeTrue(declares(StoreCapability.VIEW), "the store does not declare VIEW");
        store.put(key("twice"), Segments.random(arena, 100, 36), PutOptions.DEFAULT);
        StoreView view = store.newView();
        assertEquals(100, store.tryView(key("twice"), view));
        view.release();
        KVException e = assertThrows(KVException.class, view::release);
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("released twice"), e.getMessage());
        view.close();
        assertEquals(100, store.tryView(key("twice"), view), "the handle is reusable after its release");
        view.close();
        assertFalse(view.isHeld());
    }

    @Test
    void viewUsedAfterTheStoreClosedFailsClearlyAndNeverReadsFreedMemory() {
        assumeTrue(declares(StoreCapability.VIEW), "the store does not declare VIEW");
        store.put(key("late"), Segments.random(arena, 100_000, 37), PutOptions.DEFAULT);
        StoreView view = store.newView();
        assertEquals(100_000, store.tryView(key("late"), view));
        MemorySegment seg = view.segment();
        store.close();
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, view::segment).code());
        assertThrows(IllegalStateException.class, () -> seg.get(ValueLayout.JAVA_BYTE, 0),
                "a view segment stayed readable after the store closed");
        view.release();
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.tryView(key("late"), view))
                .code());
    }

    @Test
    void closedStoreRejectsCallsWithClosedError() {
        store.close();
        store.close();
        MemorySegment v = arena.allocate(8);
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.put(key("x"), v,
                PutOptions.DEFAULT)).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.getInto(key("x"), v)).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.size(key("x"))).code());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> store.remove(key("x"))).code());
        if (declares(StoreCapability.CLAIM)) {
            assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, store::newClaim).code());
        }
        if (declares(StoreCapability.EVENTS)) {
            assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class,
                    () -> store.subscribe(e -> { }, ErrorHandler.LOGGING)).code());
        }
    }

    @Test
    void healthCheckDescribesTheStore() {
        assertFalse(store.healthCheck().isBlank());
    }
}
