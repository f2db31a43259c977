package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreKey;
import dev.kvconnector.store.StoreView;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

/**
 * {@link ShmStore} under {@link StoreKey}s: a key's bytes name the same object as its string, up to the same limit,
 * and the connector's per-request calls under keys of new content, refilled in place, allocate nothing.
 */
class ShmStoreKeyTest {
    /** Keys at the limit of 250 UTF-8 bytes, of one-, two- and four-byte characters, and a short non-ASCII one. */
    private static final List<String> KEYS = List.of("layer-0", "naïve/κλειδί/鍵/😀", "k".repeat(250),
            "é".repeat(125), "😀".repeat(62) + "ab");
    private static final int BATCH = 4;

    @RegisterExtension
    final ShmProcessBench stores = new ShmProcessBench("a");

    private ShmStore open(String options) {
        return stores.open(options);
    }

    /** Reads {@code key}'s value through the string and asserts it is the 16-byte pattern of {@code seed}. */
    private void assertValue(ShmStore s, String key, long seed) {
        MemorySegment dst = stores.arena().allocate(16);
        assertEquals(16, s.getInto(key, dst), key);
        assertEquals(seed, ValuePattern.seed(dst), key);
    }

    /** Reads {@code key}'s value through its bytes and asserts it is the 16-byte pattern of {@code seed}. */
    private void assertValue(ShmStore s, StoreKey key, long seed) {
        MemorySegment dst = stores.arena().allocate(16);
        assertEquals(16, s.getInto(key, dst), key.toString());
        assertEquals(seed, ValuePattern.seed(dst), key.toString());
    }

    @Test
    void anObjectStoredUnderAStringIsFoundUnderTheEqualStoreKeyAndTheOtherWayRound() {
        ShmStore s = open("capacity=1MiB");
        StoreClaim claim = s.newClaim();
        StoreView view = s.newView();
        for (String k : KEYS) {
            StoreKey key = StoreKey.of(k);
            long seed = k.hashCode();
            assertTrue(s.put(k, stores.pattern(16, seed), PutOptions.DEFAULT), k);
            assertValue(s, key, seed);
            assertEquals(16, s.tryView(key, view), k);
            assertEquals(seed, ValuePattern.seed(view.segment()), k);
            view.release();
            assertFalse(s.put(key, stores.pattern(16, 0), PutOptions.DEFAULT.withIfAbsent(true)),
                    "the string's object");
            assertEquals(ClaimResult.EXISTS, s.tryClaim(key, 16, PutOptions.DEFAULT.withIfAbsent(true), claim), k);

            assertEquals(ClaimResult.CLAIMED, s.tryClaim(key, 16, PutOptions.DEFAULT, claim), k);
            ValuePattern.fill(claim.segment(), 16, seed + 1);
            assertTrue(claim.commit(), k);
            assertValue(s, k, seed + 1);
            assertEquals(1, s.removeConsumed(new StoreKey[] {key}, 1), k);
            assertFalse(s.exists(k), "the bytes removed the string's object");

            assertTrue(s.put(key, stores.pattern(16, seed + 2), PutOptions.DEFAULT), k);
            assertValue(s, k, seed + 2);
            assertEquals(16, s.tryView(k, view), k);
            view.release();
            assertEquals(ClaimResult.CLAIMED, s.tryClaim(k, 16, PutOptions.DEFAULT, claim), k);
            ValuePattern.fill(claim.segment(), 16, seed + 3);
            assertTrue(claim.commit(), k);
            assertValue(s, key, seed + 3);
            assertTrue(s.remove(k), "the string removes what the bytes stored");
        }
        StoreKey[] keys = KEYS.stream().map(StoreKey::of).toArray(StoreKey[]::new);
        String[] strings = KEYS.toArray(String[]::new);
        int n = keys.length;
        MemorySegment[] values = new MemorySegment[n];
        MemorySegment[] dsts = new MemorySegment[n];
        for (int i = 0; i < n; i++) {
            values[i] = stores.pattern(16, 100 + i);
            dsts[i] = stores.arena().allocate(16);
        }
        boolean[] stored = new boolean[n];
        s.putBatch(keys, values, n, PutOptions.DEFAULT, stored);
        long[] results = new long[n];
        s.getIntoBatch(strings, dsts, n, results);
        for (int i = 0; i < n; i++) {
            assertTrue(stored[i], strings[i]);
            assertEquals(16, results[i], strings[i]);
            assertEquals(100 + i, ValuePattern.seed(dsts[i]), strings[i]);
        }
        s.putBatch(strings, values, n, PutOptions.DEFAULT.withIfAbsent(true), stored);
        s.getIntoBatch(keys, dsts, n, results);
        for (int i = 0; i < n; i++) {
            assertFalse(stored[i], "the batch of bytes stored " + strings[i]);
            assertEquals(16, results[i], strings[i]);
        }
        assertEquals(n, s.removeConsumed(keys, n));
        assertEquals(0, s.liveEntries());
    }

    @Test
    void aKeyOneByteOverTheLimitIsAnInvalidArgumentNamingIt() {
        ShmStore s = open("capacity=1MiB");
        StoreClaim claim = s.newClaim();
        StoreView view = s.newView();
        MemorySegment v = stores.pattern(16, 1);
        for (String k : List.of("k".repeat(251), "é".repeat(125) + "k", "😀".repeat(62) + "abc")) {
            StoreKey key = StoreKey.of(k);
            assertEquals(251, key.length());
            StoreKey[] keys = {key};
            List<Executable> calls = List.of(() -> s.put(key, v, PutOptions.DEFAULT),
                    () -> s.getInto(key, stores.arena().allocate(16)),
                    () -> s.tryClaim(key, 16, PutOptions.DEFAULT, claim),
                    () -> s.tryView(key, view), () -> s.putBatch(keys, new MemorySegment[] {v}, 1,
                            PutOptions.DEFAULT, new boolean[1]),
                    () -> s.getIntoBatch(keys, new MemorySegment[] {stores.arena().allocate(16)}, 1, new long[1]),
                    () -> s.removeConsumed(keys, 1));
            for (Executable call : calls) {
                KVException e = assertThrows(KVException.class, call);
                assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
                assertEquals(KVException.shortenKey(k), e.key(), e.getMessage());
                assertTrue(e.getMessage().contains("longer than 250 UTF-8 bytes")
                        && e.getMessage().contains("(key " + KVException.shortenKey(k) + ")"), e.getMessage());
            }
        }
        assertFalse(claim.isClaimed());
        assertFalse(view.isHeld());
        assertEquals(0, s.liveEntries());
    }

    /**
     * The connector's insert and consuming drop-select of requests of new content, as {@code ShmStoreTest} measures
     * them under strings: each cycle refills its keys in place with a new request's number, puts one, claims and
     * commits one, views and gets both, puts and gets a batch, and removes all six as consumed. Each call is measured
     * on its own, so that a call that went through its key's string (the {@code KVStore} default) is named.
     */
    @Test
    void aSteadyStreamOfCallsUnderNewStoreKeysAllocatesNothing() {
        ShmStore s = open("capacity=4MiB&entries=1024");
        int len = 8192;
        MemorySegment v = stores.pattern(len, 1);
        MemorySegment dst = stores.arena().allocate(len);
        StoreKey put = new StoreKey();
        StoreKey claimed = new StoreKey();
        StoreKey[] batch = new StoreKey[BATCH];
        MemorySegment[] values = new MemorySegment[BATCH];
        MemorySegment[] dsts = new MemorySegment[BATCH];
        for (int i = 0; i < BATCH; i++) {
            batch[i] = new StoreKey();
            values[i] = v;
            dsts[i] = stores.arena().allocate(len);
        }
        StoreKey[] consumed = {put, claimed, batch[0], batch[1], batch[2], batch[3]};
        boolean[] stored = new boolean[BATCH];
        long[] results = new long[BATCH];
        StoreClaim claim = s.newClaim();
        StoreView view = s.newView();
        String[] ops = {"refill", "put", "tryClaim+commit", "tryView+release", "getInto", "putBatch", "getIntoBatch",
            "removeConsumed"};
        ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        long[] least = new long[ops.length];
        Arrays.fill(least, Long.MAX_VALUE);
        long[] round = new long[ops.length];
        int cycles = 2_000;
        int request = 0;
        long sum = 0;
        for (int r = 0; r < 10; r++) {
            Arrays.fill(round, 0);
            for (int i = 0; i < cycles; i++, request++) {
                long t0 = mx.getCurrentThreadAllocatedBytes();
                put.clear().append("req-").append(request).append("/put");
                claimed.clear().append("req-").append(request).append("/claimed/κ");
                for (int b = 0; b < BATCH; b++) {
                    batch[b].clear().append("req-").append(request).append("/L").append(b);
                }
                long t1 = mx.getCurrentThreadAllocatedBytes();
                boolean putStored = s.put(put, v, PutOptions.DEFAULT);
                long t2 = mx.getCurrentThreadAllocatedBytes();
                int claimResult = s.tryClaim(claimed, len, PutOptions.DEFAULT, claim);
                MemorySegment.copy(v, 0, claim.segment(), 0, len);
                boolean committed = claim.commit();
                long t3 = mx.getCurrentThreadAllocatedBytes();
                long viewed = s.tryView(claimed, view);
                sum += view.segment().get(ValueLayout.JAVA_LONG, 0);
                view.release();
                long t4 = mx.getCurrentThreadAllocatedBytes();
                long got = s.getInto(put, dst);
                long t5 = mx.getCurrentThreadAllocatedBytes();
                s.putBatch(batch, values, BATCH, PutOptions.DEFAULT, stored);
                long t6 = mx.getCurrentThreadAllocatedBytes();
                s.getIntoBatch(batch, dsts, BATCH, results);
                long t7 = mx.getCurrentThreadAllocatedBytes();
                int removed = s.removeConsumed(consumed, consumed.length);
                long t8 = mx.getCurrentThreadAllocatedBytes();
                round[0] += t1 - t0;
                round[1] += t2 - t1;
                round[2] += t3 - t2;
                round[3] += t4 - t3;
                round[4] += t5 - t4;
                round[5] += t6 - t5;
                round[6] += t7 - t6;
                round[7] += t8 - t7;
                if (!putStored || claimResult != ClaimResult.CLAIMED || !committed || viewed != len || got != len
                        || removed != consumed.length || !allStored(stored) || !allRead(results, len)) {
                    throw new AssertionError("cycle " + request + " failed: put " + putStored + ", claim "
                            + claimResult + ", commit " + committed + ", view " + viewed + ", get " + got
                            + ", removed " + removed);
                }
            }
            if (r >= 4) {
                for (int op = 0; op < ops.length; op++) {
                    least[op] = Math.min(least[op], round[op]);
                }
            }
        }
        assertEquals(1L * cycles * 10, sum, "every view read the value's first word, seed 1");
        assertEquals(0, s.liveEntries(), "every request was consumed");
        StringBuilder report = new StringBuilder();
        long total = 0;
        for (int op = 0; op < ops.length; op++) {
            report.append(' ').append(ops[op]).append(' ').append(least[op]);
            total += least[op];
        }
        assertEquals(0, total, "bytes allocated by " + cycles + " requests of new keys after warm-up, by call:"
                + report);
    }

    private static boolean allStored(boolean[] stored) {
        for (boolean b : stored) {
            if (!b) {
                return false;
            }
        }
        return true;
    }

    private static boolean allRead(long[] results, long len) {
        for (long r : results) {
            if (r != len) {
                return false;
            }
        }
        return true;
    }
}
