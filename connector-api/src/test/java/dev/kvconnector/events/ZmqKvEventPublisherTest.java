package dev.kvconnector.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The publisher over real ZMQ sockets: live messages, replay from the buffer, and a snapshot when it is gone. */
class ZmqKvEventPublisherTest {
    private static final String ROOT = "ab".repeat(32);

    private static String hash(int i) {
        return String.format("%064x", i);
    }

    private static KvEvent.Stored stored(int i) {
        return new KvEvent.Stored(1, i, "e", "shm:/s", "kvc-v1", hash(i), i == 0 ? ROOT : hash(i - 1), 16, 2);
    }

    /**
     * Receives until a message comes (the SUB socket joins asynchronously, so the first sends may be lost), with a
     * new SUB socket after each second of silence, as the proxy's feed does after three missed heartbeats.
     */
    private static KvEventBatch next(ZmqKvEventSubscriber sub, ZmqKvEventPublisher pub, KvEvent probe)
            throws Exception {
        for (int i = 1; i <= 200; i++) {
            if (probe != null) {
                pub.onEvent(probe);
            }
            KvEventBatch b = sub.receive(50);
            if (b != null) {
                return b;
            }
            if (i % 20 == 0) {
                sub.reconnect();
            }
        }
        throw new AssertionError("no message from " + pub.publishEndpoint());
    }

    @Test
    void liveMessagesCarryTheEpochAndRootAndAReplayFromTheBufferReturnsThemInOrder() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0");
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), pub.replayEndpoint(),
                     "kv")) {
            pub.onAttach(new KvEventSource("e", 5, "shm:/s", "kvc-v1", 16, ROOT));
            KvEventBatch first = next(sub, pub, stored(0));
            assertEquals(pub.epoch(), first.epoch());
            assertEquals(ROOT, first.source().rootHash());
            assertEquals(16, first.source().chunkTokens());
            long last = first.sequence();
            List<KvEventBatch> replayed = sub.replay(0, 2_000);
            assertTrue(replayed.size() >= 1, replayed.toString());
            assertEquals(0, replayed.get(0).sequence());
            assertEquals(last, replayed.get(replayed.size() - 1).sequence());
            for (int i = 0; i < replayed.size(); i++) {
                assertEquals(i, replayed.get(i).sequence());
            }
        }
    }

    @Test
    void aReplayFromBeforeTheBufferGetsASnapshotOfTheLiveChunksNumberedAsTheLastMessage() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "kv",
                1024, 2, 100);
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), pub.replayEndpoint(),
                     "")) {
            next(sub, pub, new KvEvent.AllCleared(1, 0, "e"));
            for (int i = 0; i < 5; i++) {
                pub.onEvent(stored(i));
                assertNotNull(sub.receive(2_000));
            }
            pub.onEvent(new KvEvent.Removed(1, 9, "e", "shm:/s", hash(1), RemovalReason.CONSUMED));
            KvEventBatch lastLive = sub.receive(2_000);
            assertNotNull(lastLive);
            List<KvEventBatch> answer = sub.replay(0, 2_000);
            assertEquals(1, answer.size(), answer.toString());
            KvEventBatch snapshot = answer.get(0);
            assertEquals(lastLive.sequence(), snapshot.sequence());
            assertInstanceOf(KvEvent.AllCleared.class, snapshot.events().get(0));
            List<String> held = snapshot.events().stream().skip(1).map(e -> ((KvEvent.Stored) e).chunkHash())
                    .toList();
            assertEquals(List.of(hash(0), hash(2), hash(3), hash(4)), held);
        }
    }

    @Test
    void anIdlePublisherSendsAnEmptyBatchEachHeartbeat() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", null);
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), null, "kv")) {
            long seq = next(sub, pub, stored(0)).sequence();
            while (true) {
                KvEventBatch b = sub.receive((int) (3 * ZmqKvEventPublisher.HEARTBEAT_MILLIS));
                assertNotNull(b, "no heartbeat in three intervals");
                assertTrue(b.sequence() > seq);
                seq = b.sequence();
                if (b.events().isEmpty()) {
                    return;
                }
            }
        }
    }

    @Test
    void aFullQueueDropsAndCountsEventsAndTheNextMessageSkipsASequenceNumber() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", null, "kv", 1, 10, 10);
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), null, "kv")) {
            long seq = next(sub, pub, stored(0)).sequence();
            // Drain anything the probe loop left queued, then flood the one-slot queue.
            while (sub.receive(100) != null) {
                seq++;
            }
            for (int i = 0; i < 10_000; i++) {
                pub.onEvent(stored(i));
            }
            assertTrue(pub.droppedEvents() > 0, "nothing dropped");
            long previous = seq;
            boolean gap = false;
            KvEventBatch b;
            while ((b = sub.receive(300)) != null) {
                gap |= b.sequence() > previous + 1;
                previous = b.sequence();
            }
            assertTrue(gap, "no sequence number was skipped after " + pub.droppedEvents() + " drops");
        }
    }

    @Test
    void aSnapshotAfterAFloodHoldsWhatTheConnectorToldEvenWhereTheFullQueueDroppedTheEvents() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "kv",
                1, 2, 100_000);
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), pub.replayEndpoint(),
                     "kv")) {
            next(sub, pub, new KvEvent.AllCleared(1, 0, "e"));
            int chunks = 5_000;
            long seq = 1;
            for (int i = 0; i < chunks; i++) {
                pub.onEvent(new KvEvent.Stored(1, seq++, "e", "shm:/s", "kvc-v1", hash(i), ROOT, 16, 2));
            }
            for (int i = 0; i < chunks; i += 2) {
                pub.onEvent(new KvEvent.Removed(1, seq++, "e", "shm:/s", hash(i), RemovalReason.CONSUMED));
            }
            assertTrue(pub.droppedEvents() > 0, "the one-slot queue dropped nothing: the test proves nothing");
            KvEventBatch drained;
            do {
                drained = sub.receive(300);
            } while (drained != null);

            List<KvEventBatch> answer = sub.replay(0, 5_000);

            assertEquals(1, answer.size(), "expected one snapshot");
            List<String> held = answer.get(0).events().stream().skip(1).map(e -> ((KvEvent.Stored) e).chunkHash())
                    .sorted().toList();
            List<String> odd = new ArrayList<>();
            for (int i = 1; i < chunks; i += 2) {
                odd.add(hash(i));
            }
            List<String> wrong = new ArrayList<>(held);
            wrong.removeAll(odd);
            assertTrue(odd.equals(held), "the snapshot after " + pub.droppedEvents() + " dropped events holds "
                    + held.size() + " chunks where the connector left the " + odd.size() + " odd ones; "
                    + wrong.size() + " of them removed, the first " + (wrong.isEmpty() ? "none" : wrong.get(0)));
        }
    }

    @Test
    void anEventThatSkipsAheadOfTheConnectorsNumbersMakesTheNextMessageSkipOneToo() throws Exception {
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", null);
             ZmqKvEventSubscriber sub = new ZmqKvEventSubscriber("e", pub.publishEndpoint(), null, "kv")) {
            long seq = next(sub, pub, stored(0)).sequence();
            while (sub.receive(100) != null) {
                seq++;
            }
            pub.onEvent(stored(1));
            KvEventBatch contiguous = sub.receive(2_000);
            pub.onEvent(stored(3));
            KvEventBatch afterGap = sub.receive(2_000);

            assertNotNull(contiguous);
            assertNotNull(afterGap);
            assertEquals(1, contiguous.events().size(), "a heartbeat came between: " + contiguous);
            assertEquals(seq + 1, contiguous.sequence(), "a contiguous event made the message skip");
            assertEquals(contiguous.sequence() + 2, afterGap.sequence(), "the connector's gap was not passed on");
            assertEquals(0, pub.droppedEvents());
        }
    }
}
