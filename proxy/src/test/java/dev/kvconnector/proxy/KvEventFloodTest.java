package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.testkit.ChildJvm;
import dev.kvconnector.testkit.KvEventFloodPublisher;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A flood of KV events from another process (10^5 a second in vLLM's wire format over ZMQ, for 3 s here) while
 * requests go through the proxy: every request completes and none stalls, the proxy's queue stays within its bound,
 * every event is applied or dropped and counted, and the index ends holding the publisher's chunks. Not a timing test:
 * the latency a flood adds is {@code KvEventFloodBenchmark}'s to measure (benchmarks module), over the 10 s.
 */
class KvEventFloodTest extends ProxyTestBase {
    private static final int WINDOW = 2_000;
    private static final int CHUNK_TOKENS = 16;
    private static final long RATE = 100_000;
    private static final long FLOOD_MILLIS = 3_000;
    /** A stall detector, not a latency goal: the test JVM shares two loaded cores with the publisher's. */
    private static final long STALL_NANOS = 5_000_000_000L;

    @Test
    void requestsKeepCompletingWhileAnotherProcessFloodsTheIndexAndTheIndexEndsAsThePublishersChunks()
            throws Exception {
        var p = instance("p");
        var d = instance("d");
        try (ChildJvm publisher = KvEventFloodPublisher.start(p.address(), "GPU", CHUNK_TOKENS, "ab".repeat(32),
                WINDOW)) {
            String[] endpoints = publisher.await("READY", 60).split(" ");
            XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p.address()).decode(d.address())
                    .kvEvents(new KvEventEndpoint(p.address(), endpoints[1], endpoints[2])));
            KvRouter router = proxy.kvRouter();
            publisher.send("seed");
            publisher.await("SEEDED", 30);
            // The link is live once the seed is indexed (a SUB that joined late gets it by replay, one that never
            // heard anything is replaced after three silent heartbeats).
            awaitIndexed(router, WINDOW, 30);
            long appliedBefore = router.metrics.events.sum();

            AtomicLong answered = new AtomicLong();
            AtomicLong slowest = new AtomicLong();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread requests = Thread.ofPlatform().name("flood-test-requests").start(() -> {
                String body = "{\"prompt\":\"" + "a flood of events".repeat(8) + "\",\"max_tokens\":1}";
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        long t = System.nanoTime();
                        int status = post(proxy, "/v1/completions", body).statusCode();
                        slowest.accumulateAndGet(System.nanoTime() - t, Math::max);
                        if (status != 200) {
                            throw new AssertionError("a request answered " + status + " during the flood");
                        }
                        answered.incrementAndGet();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } catch (Exception | AssertionError e) {
                    failed.compareAndSet(null, e);
                }
            });
            String[] flooded;
            try {
                publisher.send("flood " + RATE + " " + FLOOD_MILLIS);
                flooded = publisher.await("FLOODED", 60).split(" ");
            } finally {
                requests.interrupt();
                requests.join();
            }
            long offered = Long.parseLong(flooded[1]);
            long publisherDropped = Long.parseLong(flooded[2]);
            long next = Long.parseLong(flooded[4]);

            assertEquals(null, failed.get(), "requests during the flood");
            assertTrue(answered.get() >= 10, "only " + answered.get() + " requests answered during the flood");
            assertTrue(slowest.get() < STALL_NANOS, "a request took " + slowest.get() / 1e6 + " ms");
            assertTrue(router.metrics.maxQueued() <= KvEventIngest.QUEUE_MESSAGES_DEFAULT,
                    router.metrics.maxQueued() + " messages queued at once");
            if (publisherDropped == 0) {
                // The index ends as the publisher's window: the last WINDOW chunks, none before.
                awaitIndexed(router, WINDOW, 10);
                assertTrue(router.index.holds(0, KvEventFloodPublisher.chunkHash(next - 1), false)
                        && router.index.holds(0, KvEventFloodPublisher.chunkHash(next - WINDOW), false),
                        "the flood's last chunks are indexed");
                assertTrue(!router.index.holds(0, KvEventFloodPublisher.chunkHash(next - WINDOW - 1), false),
                        "a chunk the flood removed is still indexed");
            } else {
                // A publisher that drops events skips a sequence number, a gap; its snapshot may then hold chunks
                // whose removal it dropped, so the index's final chunks are not checked.
                assertTrue(router.metrics.gaps.sum() > 0, "the publisher dropped events without a gap");
            }
            long applied = router.metrics.events.sum() - appliedBefore;
            long dropped = router.metrics.eventsDropped.sum();
            assertTrue(applied + dropped >= offered - publisherDropped, applied + " events applied and " + dropped
                    + " dropped of " + offered + " offered (" + publisherDropped + " dropped by the publisher)");
            if (dropped > 0) {
                assertTrue(router.metrics.gaps.sum() > 0, "events were dropped without a gap");
            }
            System.out.printf("kv event flood test: %d events offered in %d ms, %d applied, %d dropped by the proxy, "
                    + "%d by the publisher; %d requests answered, the slowest in %.1f ms; %d messages queued at most%n",
                    offered, FLOOD_MILLIS, applied, dropped, publisherDropped, answered.get(), slowest.get() / 1e6,
                    router.metrics.maxQueued());
        }
    }

    private static void awaitIndexed(KvRouter router, long chunks, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (router.index.size() != chunks) {
            assertTrue(System.nanoTime() < deadline, "the index holds " + router.index.size() + " chunks after "
                    + seconds + " s, not " + chunks);
            Thread.sleep(20);
        }
    }
}
