package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.ZmqKvEventPublisher;
import dev.kvconnector.events.ZmqKvEventSubscriber;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * One engine's events off the socket into the index through a bounded queue: while the apply thread is held up, the
 * socket thread keeps taking messages, queues what fits and drops and counts the rest, and the gap they leave is
 * resynchronised, so the index ends as the publisher's chunks are.
 */
class KvEventIngestTest {
    private static final String ROOT = "ab".repeat(32);

    private static String hash(int i) {
        return String.format("%016x", (i + 1) * 0x9E3779B97F4A7C15L) + "cd".repeat(24);
    }

    private static KvEvent stored(long sequence, int chunk) {
        return new KvEvent.Stored(1, sequence, "e", "GPU", "kvc-v1", hash(chunk), null, 16, -1);
    }

    @Test
    void aFullQueueDropsAndCountsMessagesAndTheGapTheyLeaveIsResynchronised() throws Exception {
        PrefixIndex index = new PrefixIndex();
        KvMetrics metrics = new KvMetrics();
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0")) {
            pub.onAttach(new KvEventSource("e", 1, "GPU", "kvc-v1", 16, ROOT));
            ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), pub.replayEndpoint(), "");
            KvEventFeed.Replay replay = KvEventIngest.replayOf(sub);
            AtomicBoolean holdNextReplay = new AtomicBoolean();
            CountDownLatch release = new CountDownLatch(1);
            KvEventFeed feed = new KvEventFeed("e", 0, index, metrics, (from, each) -> {
                if (holdNextReplay.getAndSet(false)) {
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                replay.from(from, each);
            });
            try (KvEventIngest ingest = new KvEventIngest(sub, feed, metrics, 2, 1 << 20)) {
                long seq = 0;
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (!index.holds(0, hash(0), false)) {
                    assertTrue(System.nanoTime() < deadline, "no event reached the index in 30 s, reconnects included");
                    pub.onEvent(stored(seq++, 0));
                    Thread.sleep(50);
                }
                holdNextReplay.set(true);
                seq++; // a number skipped: the publisher's next message skips one too, a gap for the feed
                pub.onEvent(stored(seq++, 1));
                awaitTrue(() -> !holdNextReplay.get(), "the gap's replay started");
                // Published until the socket thread has dropped 20 messages that did not fit. A count of events
                // fixed in advance made too few messages on a loaded machine: the publisher batches what is queued
                // within a millisecond, however long the pause between events.
                int published = 2;
                long dropDeadline = System.nanoTime() + 30_000_000_000L;
                while (metrics.messagesDropped.sum() < 20) {
                    assertTrue(System.nanoTime() < dropDeadline, "the socket thread dropped only "
                            + metrics.messagesDropped.sum() + " messages of " + published + " chunks' events");
                    pub.onEvent(stored(seq++, published++));
                    Thread.sleep(3);
                }
                int chunks = published;
                assertTrue(ingest.queued() <= 2, ingest.queued() + " messages queued");
                release.countDown();
                awaitTrue(() -> {
                    for (int c = 0; c < chunks; c++) {
                        if (!index.holds(0, hash(c), false)) {
                            return false;
                        }
                    }
                    return true;
                }, "every chunk published is indexed");
                assertEquals(chunks, index.size());
                assertTrue(metrics.eventsDropped.sum() >= metrics.messagesDropped.sum(),
                        metrics.eventsDropped.sum() + " events in " + metrics.messagesDropped.sum() + " messages");
                assertTrue(metrics.gaps.sum() >= 1, metrics.gaps.sum() + " gaps");
                assertEquals(0, metrics.resyncFallbacks.sum(), "the publisher's replay covered every gap");
                // The gap's replay went past the messages queued meanwhile: they are stale, counted and ignored.
                assertTrue(metrics.duplicates.sum() + metrics.outOfOrder.sum() >= 1);
                awaitTrue(() -> ingest.queued() == 0, "the queue drained");
            }
        }
    }

    @Test
    void aQueueBoundThatIsNotAPositiveNumberFailsNamingItsProperty() {
        for (String bad : new String[] {"0", "-5", "lots", "3000000000"}) {
            System.setProperty(KvEventIngest.QUEUE_MESSAGES_PROP_NAME, bad);
            try {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, KvEventIngest::queueMessages);
                assertTrue(e.getMessage().contains(KvEventIngest.QUEUE_MESSAGES_PROP_NAME + "=" + bad),
                        e.getMessage());
            } finally {
                System.clearProperty(KvEventIngest.QUEUE_MESSAGES_PROP_NAME);
            }
        }
        System.setProperty(KvEventIngest.QUEUE_BYTES_PROP_NAME, "1MiB");
        try {
            assertThrows(IllegalArgumentException.class, KvEventIngest::queueBytes);
        } finally {
            System.clearProperty(KvEventIngest.QUEUE_BYTES_PROP_NAME);
        }
        assertEquals(KvEventIngest.QUEUE_MESSAGES_DEFAULT, KvEventIngest.queueMessages());
        assertEquals(KvEventIngest.QUEUE_BYTES_DEFAULT, KvEventIngest.queueBytes());
    }

    private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        ProxyTestBase.awaitTrue(condition, what);
    }
}
