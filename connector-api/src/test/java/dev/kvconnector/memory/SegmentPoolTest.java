package dev.kvconnector.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class SegmentPoolTest {
    private static final long MIB = 1L << 20;

    @Test
    void aLeaseIsSizedToTheRequestInWholePagesNotToAPowerOfTwo() {
        try (SegmentPool pool = new SegmentPool(64 * MIB)) {
            MemorySegment layer = pool.acquire(4 * MIB);
            MemorySegment withHeader = pool.acquire(4 * MIB + 64);
            MemorySegment tiny = pool.acquire(1);
            assertEquals(4 * MIB, layer.byteSize());
            assertEquals(4 * MIB + SegmentPool.PAGE_BYTES, withHeader.byteSize());
            assertEquals(SegmentPool.PAGE_BYTES, tiny.byteSize());
            for (MemorySegment s : List.of(layer, withHeader, tiny)) {
                assertEquals(0, s.address() % SegmentPool.PAGE_BYTES, "segment not page aligned");
                pool.release(s);
            }
            assertEquals(8 * MIB + 2 * SegmentPool.PAGE_BYTES, pool.allocatedBytes());
        }
    }

    @Test
    void aReleasedSegmentServesTheNextLeaseOfItsSize() {
        try (SegmentPool pool = new SegmentPool(16 * MIB)) {
            MemorySegment first = pool.acquire(3 * MIB + 5);
            first.set(ValueLayout.JAVA_LONG, 0, 42);
            pool.release(first);
            MemorySegment second = pool.acquire(3 * MIB + 100);
            assertEquals(first.address(), second.address(), "the idle segment of the same size was not reused");
            assertEquals(first.byteSize(), pool.allocatedBytes());
            assertEquals(1, pool.outstandingLeases());
            pool.release(second);
            assertEquals(0, pool.outstandingLeases());
        }
    }

    @Test
    void aFullPoolReturnsNullFromTryAcquireAndStoreFullFromAcquire() {
        try (SegmentPool pool = new SegmentPool(8 * MIB)) {
            MemorySegment a = pool.acquire(4 * MIB);
            MemorySegment b = pool.acquire(4 * MIB);
            assertNull(pool.tryAcquire(4 * MIB), "a full pool must answer with null, not an exception");
            assertEquals(2, pool.outstandingLeases(), "a refused tryAcquire counted a lease");
            KVException e = assertThrows(KVException.class, () -> pool.acquire(4 * MIB));
            assertEquals(ErrorCode.STORE_FULL, e.code());
            assertTrue(e.getMessage().contains("8388608") && e.getMessage().contains("4194304"), e.getMessage());
            pool.release(a);
            MemorySegment again = pool.tryAcquire(4 * MIB);
            assertNotNull(again, "a released segment must serve the next lease of its size");
            assertEquals(a.address(), again.address());
            pool.release(again);
            pool.release(b);
        }
    }

    @Test
    void idleSegmentsOfOtherSizesAreRetiredToMakeRoomAndTheRetireCallbackSeesThem() {
        List<MemorySegment> retired = new ArrayList<>();
        try (SegmentPool pool = new SegmentPool(8 * MIB, s -> { }, retired::add)) {
            MemorySegment a = pool.acquire(4 * MIB);
            MemorySegment b = pool.acquire(4 * MIB);
            pool.release(a);
            pool.release(b);
            MemorySegment big = pool.acquire(6 * MIB);
            assertEquals(6 * MIB, big.byteSize());
            assertEquals(2, retired.size(), "both idle 4 MiB segments had to go for 6 MiB under an 8 MiB bound");
            assertEquals(6 * MIB, pool.allocatedBytes());
            assertEquals(1, pool.segments().size());
            pool.release(big);
        }
    }

    @Test
    void aRegisteringPoolNeverFreesASegmentBeforeCloseButServesSmallerRequestsFromLargerIdleOnes() {
        List<MemorySegment> registered = new ArrayList<>();
        try (SegmentPool pool = new SegmentPool(8 * MIB, registered::add)) {
            MemorySegment a = pool.acquire(4 * MIB);
            MemorySegment b = pool.acquire(4 * MIB);
            pool.release(a);
            pool.release(b);
            assertNull(pool.tryAcquire(6 * MIB), "a registering pool freed registered memory to make room");
            assertEquals(2, pool.segments().size());
            MemorySegment smaller = pool.acquire(3 * MIB);
            assertEquals(4 * MIB, smaller.byteSize(), "the idle 4 MiB segment should serve 3 MiB at the bound");
            assertEquals(2, registered.size(), "no new segment should have been allocated");
            pool.release(smaller);
        }
    }

    @Test
    void aLeaseUsedAfterCloseThrowsInsteadOfTouchingFreedMemory() {
        long leasesBefore = SegmentPool.liveLeases();
        SegmentPool pool = new SegmentPool(MIB);
        MemorySegment s = pool.acquire(8192);
        KVException e = assertThrows(KVException.class, pool::close);
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertThrows(IllegalStateException.class, () -> s.get(ValueLayout.JAVA_BYTE, 0));
        pool.release(s);
        assertEquals(leasesBefore, SegmentPool.liveLeases());
        assertEquals(ErrorCode.CLOSED, assertThrows(KVException.class, () -> pool.tryAcquire(10)).code());
        pool.close();
    }

    @Test
    void releasingASliceOrABadSizeIsRefusedWithTheSizeNamed() {
        try (SegmentPool pool = new SegmentPool(MIB)) {
            MemorySegment s = pool.acquire(8192);
            KVException e = assertThrows(KVException.class, () -> pool.release(s.asSlice(0, 100)));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("100 bytes"), e.getMessage());
            assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(KVException.class, () -> pool.acquire(-1)).code());
            pool.release(s);
        }
    }

    @Test
    void closeFreesEveryByteThePoolAllocated() {
        long before = NativeMemory.liveBytes();
        SegmentPool pool = new SegmentPool(16 * MIB);
        for (long n : new long[] {4096, 3 * MIB, 5 * MIB + 1}) {
            pool.release(pool.acquire(n));
        }
        assertTrue(NativeMemory.liveBytes() - before >= 8 * MIB);
        pool.close();
        assertEquals(before, NativeMemory.liveBytes());
    }

    @Test
    void steadyAcquireAndReleaseAllocateNothing() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        try (SegmentPool pool = new SegmentPool(16 * MIB)) {
            long best = Long.MAX_VALUE;
            for (int round = 0; round < 30 && best > 0; round++) {
                long before = mx.getThreadAllocatedBytes(tid);
                for (int i = 0; i < 5000; i++) {
                    MemorySegment s = pool.tryAcquire(4 * MIB + 64);
                    pool.release(s);
                }
                best = Math.min(best, mx.getThreadAllocatedBytes(tid) - before);
            }
            assertEquals(0, best, "5000 steady leases allocated bytes");
        }
    }

    @Test
    void concurrentLeasesNeverShareASegment() throws Exception {
        try (SegmentPool pool = new SegmentPool(64 * MIB)) {
            ExecutorService threads = Executors.newFixedThreadPool(4);
            try {
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    long mark = t + 1;
                    done.add(threads.submit(() -> {
                        for (int i = 0; i < 2000; i++) {
                            MemorySegment s = pool.acquire(64 * 1024 * (1 + i % 3));
                            s.set(ValueLayout.JAVA_LONG, 0, mark);
                            Thread.onSpinWait();
                            assertEquals(mark, s.get(ValueLayout.JAVA_LONG, 0), "another lease wrote this segment");
                            pool.release(s);
                        }
                        return null;
                    }));
                }
                for (Future<?> f : done) {
                    f.get(60, TimeUnit.SECONDS);
                }
            } finally {
                threads.shutdownNow();
            }
            assertEquals(0, pool.outstandingLeases());
        }
    }

    @Test
    void aTimedAcquireGetsWhatAnotherThreadReleasesAndOtherwiseGivesUpAtItsDeadline() throws Exception {
        try (SegmentPool pool = new SegmentPool(8 * MIB)) {
            MemorySegment all = pool.acquire(8 * MIB - 64 * 1024);
            long start = System.nanoTime();
            assertNull(pool.tryAcquire(4 * MIB, TimeUnit.MILLISECONDS.toNanos(100)));
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(90), "gave up early");
            assertTrue(pool.describeNoRoom(4 * MIB).contains("staging pool exhausted"));
            ExecutorService releaser = Executors.newSingleThreadExecutor();
            try {
                Future<?> f = releaser.submit(() -> {
                    Thread.sleep(50);
                    pool.release(all);
                    return null;
                });
                MemorySegment got = pool.tryAcquire(4 * MIB, TimeUnit.SECONDS.toNanos(5));
                assertNotNull(got, "the released room was not taken");
                f.get();
                pool.release(got);
            } finally {
                releaser.shutdownNow();
            }
        }
    }
}
