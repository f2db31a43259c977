package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreCapability;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEvent.Type;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.StoreSubscription;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The event ring of an {@code shm:} file, through {@code subscribe}: what is told, from which process, and gaps. */
class ShmEventsTest {
    private static final long PAUSE = 60_000;

    @RegisterExtension
    final ShmProcessBench bench = new ShmProcessBench("ev");

    private final List<Throwable> failures = new CopyOnWriteArrayList<>();
    private final ErrorHandler errors = (where, failure) -> failures.add(failure);

    @AfterEach
    void noSubscriptionFailed() {
        assertEquals(List.of(), failures);
    }

    /** Records what a subscription delivers. */
    static final class Recorder implements StoreEventListener {
        final LinkedBlockingQueue<StoreEvent> events = new LinkedBlockingQueue<>();

        @Override
        public void onEvent(StoreEvent event) {
            events.add(event);
        }

        StoreEvent next() throws InterruptedException {
            StoreEvent e = events.poll(10, TimeUnit.SECONDS);
            assertNotNull(e, "no event within 10 s");
            return e;
        }

        /** Takes events until one of {@code type} for {@code key} arrives, and returns all taken, that one last. */
        List<StoreEvent> until(Type type, String key) throws InterruptedException {
            List<StoreEvent> seen = new ArrayList<>();
            StoreEvent e;
            do {
                e = next();
                seen.add(e);
            } while (e.type() != type || !e.key().equals(key));
            return seen;
        }
    }

    private static void assertEvent(StoreEvent e, Type type, String key, long bytes) {
        assertEquals(type, e.type(), e.toString());
        assertEquals(key, e.key(), e.toString());
        assertEquals(bytes, e.bytes(), e.toString());
    }

    @Test
    void everyChangeIsToldInOrderWithItsReasonSizeAndConsecutiveNumbers() throws Exception {
        ShmStore s = bench.open("capacity=64KiB&block=4KiB&entries=16");
        assertTrue(s.capabilities().contains(StoreCapability.EVENTS));
        Recorder r = new Recorder();
        try (StoreSubscription sub = s.subscribe(r, errors)) {
            s.put("a", bench.pattern(1000, 1), PutOptions.DEFAULT);
            assertTrue(s.remove("a"));
            s.put("t", bench.pattern(100, 2), PutOptions.DEFAULT.withTtlMillis(30));
            Thread.sleep(100);
            assertEquals(GetResult.MISS, s.getInto("t", bench.arena().allocate(100)));
            for (int i = 0; i < 5; i++) {
                s.put("e" + i, bench.pattern(16 << 10, 3 + i), PutOptions.DEFAULT);
            }

            List<StoreEvent> got = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                got.add(r.next());
            }
            assertEvent(got.get(0), Type.STORED, "a", 1000);
            assertEvent(got.get(1), Type.REMOVED, "a", 1000);
            assertEvent(got.get(2), Type.STORED, "t", 100);
            assertEvent(got.get(3), Type.EXPIRED, "t", 100);
            for (int i = 0; i < 4; i++) {
                assertEvent(got.get(4 + i), Type.STORED, "e" + i, 16 << 10);
            }
            assertEvent(got.get(8), Type.EVICTED, "e0", 16 << 10);
            assertEvent(got.get(9), Type.STORED, "e4", 16 << 10);
            for (int i = 1; i < got.size(); i++) {
                assertTrue(got.get(i - 1).isFollowedBy(got.get(i)), "a gap between " + got.get(i - 1) + " and "
                        + got.get(i));
            }
            assertTrue(got.stream().allMatch(e -> e.storeUri().equals(s.uri())));
        }
        s.put("after-close", bench.pattern(64, 9), PutOptions.DEFAULT);
        Thread.sleep(50);
        assertTrue(r.events.isEmpty(), "a closed subscription delivered " + r.events);
    }

    @Test
    void changesMadeByAnotherProcessAreTold() throws Exception {
        ShmStore s = bench.open("capacity=8MiB");
        Recorder r = new Recorder();
        try (StoreSubscription sub = s.subscribe(r, errors)) {
            ChildJvm child = bench.child(Map.of(), "put", bench.uri("capacity=8MiB"), "theirs", "4096", "5");
            child.await("PUT true", 30);
            assertEquals(0, child.exitCode(20), child.output());

            assertEvent(r.next(), Type.STORED, "theirs", 4096);
        }
    }

    @Test
    void aSubscriberTheWritersLapSeesAGapAndNeverATornEvent() throws Exception {
        ShmStore s = bench.open("capacity=8MiB&entries=4096&events=4KiB");
        CountDownLatch release = new CountDownLatch(1);
        List<StoreEvent> got = new CopyOnWriteArrayList<>();
        StoreEventListener slow = e -> {
            got.add(e);
            try {
                release.await();
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
        };
        Set<String> keys = new HashSet<>();
        try (StoreSubscription sub = s.subscribe(slow, errors)) {
            MemorySegment v = bench.pattern(64, 1);
            for (int i = 0; i < 400; i++) {
                String key = "lap-" + "x".repeat(60) + "-" + i;
                keys.add(key);
                s.put(key, v, PutOptions.DEFAULT);
                if (i == 0) {
                    // The subscriber holds the first event before the writer laps it; lapped before it read any, it
                    // would start at the oldest event left and see no gap.
                    ShmProcessBench.awaitTrue("the first event is delivered", () -> !got.isEmpty());
                }
            }
            release.countDown();
            String last = "lap-" + "x".repeat(60) + "-399";
            ShmProcessBench.awaitTrue("the last put is told", () -> got.stream().anyMatch(e -> e.key().equals(last)));
            assertTrue(((ShmSubscription) sub).laps() >= 1, "the subscriber was never lapped");
        }
        boolean gap = false;
        for (int i = 1; i < got.size(); i++) {
            assertTrue(got.get(i).sequence() > got.get(i - 1).sequence(), "out of order: " + got);
            gap |= !got.get(i - 1).isFollowedBy(got.get(i));
        }
        assertTrue(gap, "400 events through a 4 KiB ring to a stalled subscriber showed no gap");
        assertTrue(got.size() < 400, "every event arrived though the ring holds about 40");
        for (StoreEvent e : got) {
            assertTrue(keys.contains(e.key()) && e.type() == Type.STORED && e.bytes() == 64, "torn: " + e);
        }
    }

    @Test
    void aWriterKilledInTheMiddleOfARecordLeavesNoTornEventAndAGap() throws Exception {
        ShmStore s = bench.open("capacity=8MiB&lock-timeout=300ms");
        Recorder r = new Recorder();
        try (StoreSubscription sub = s.subscribe(r, errors)) {
            s.put("before", bench.pattern(100, 1), PutOptions.DEFAULT);
            StoreEvent before = r.next();
            assertEvent(before, Type.STORED, "before", 100);
            ChildJvm writer = bench.child(Map.of(ShmStore.PROP_EVENT_PAUSE_MS, String.valueOf(PAUSE)),
                    "put", bench.uri("capacity=8MiB"), "x", "4096", "2");
            writer.await("PUTTING", 20);
            ShmProcessBench.awaitTrue("the child holds the lock in its event record", () -> {
                if (ProcessIdentity.pid(s.lockOwner()) != writer.pid()) {
                    return false;
                }
                LockSupport.parkNanos(200_000_000);
                return ProcessIdentity.pid(s.lockOwner()) == writer.pid();
            });
            writer.kill();
            assertNull(r.events.poll(200, TimeUnit.MILLISECONDS), "the half-written record was read");

            s.put("after", bench.pattern(200, 3), PutOptions.DEFAULT);

            StoreEvent after = r.next();
            assertEvent(after, Type.STORED, "after", 200);
            assertFalse(before.isFollowedBy(after), "no gap where the dead writer's event was lost");
            assertEquals(before.epoch(), after.epoch());
            assertTrue(s.exists("x"), "the child published its entry before it died in the record");
        }
    }

    @Test
    void aSubscriptionWhoseFileIsTruncatedIntoItsTablesReportsItNamingTheFileAndDeliversNothingMore()
            throws Exception {
        ShmStore s = bench.open("capacity=1MiB");
        Recorder recorder = new Recorder();
        LinkedBlockingQueue<Throwable> reported = new LinkedBlockingQueue<>();
        try (StoreSubscription sub = s.subscribe(recorder, (where, failure) -> reported.add(failure))) {
            s.put("k", bench.pattern(64, 1), PutOptions.DEFAULT);
            assertEvent(recorder.next(), Type.STORED, "k", 64);
            try (var ch = java.nio.channels.FileChannel.open(s.path(), java.nio.file.StandardOpenOption.WRITE)) {
                ch.truncate(0);
            }
            Throwable failure = reported.poll(10, TimeUnit.SECONDS);
            assertNotNull(failure, "the subscription reported nothing");
            assertTrue(failure instanceof dev.kvconnector.error.KVException k
                    && k.code() == dev.kvconnector.error.ErrorCode.CORRUPT_OBJECT
                    && k.getMessage().contains(s.path() + " is 0 bytes"), failure.toString());
            assertNull(reported.poll(50, TimeUnit.MILLISECONDS), "reported once, then the subscription stopped");
            assertTrue(recorder.events.isEmpty());
        }
    }
}
