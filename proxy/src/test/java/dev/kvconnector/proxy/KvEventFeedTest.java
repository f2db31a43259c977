package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventBatch;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.MalformedEventException;
import dev.kvconnector.events.RemovalReason;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** One engine's stream into the index: in order, gaps, restarts, duplicates and malformed messages. */
class KvEventFeedTest {
    private static final String STORE = "valkey://store:6379";
    private final PrefixIndex index = new PrefixIndex();
    private final KvMetrics metrics = new KvMetrics();
    /** What the scripted publisher has sent, by sequence, for replays. */
    private final List<KvEventBatch> sent = new ArrayList<>();
    private final List<Long> replayRequests = new ArrayList<>();

    static KvEventBatch batch(long epoch, long seq, KvEvent... events) {
        return new KvEventBatch(new KvEventSource("e", epoch, null, null, 16, "aa".repeat(32)), seq, 0, List.of(events));
    }

    static KvEvent stored(String hash) {
        return new KvEvent.Stored(0, 0, "e", STORE, null, hash, null, 16, -1);
    }

    static KvEvent removed(String hash) {
        return new KvEvent.Removed(0, 0, "e", STORE, hash, RemovalReason.REMOVED);
    }

    private KvEventFeed feed(boolean replays) {
        return new KvEventFeed("e", 0, index, metrics, replays ? (from, each) -> {
            replayRequests.add(from);
            sent.stream().filter(b -> b.sequence() >= from).forEach(each);
        } : null);
    }

    private KvEventBatch send(long epoch, long seq, KvEvent... events) {
        KvEventBatch b = batch(epoch, seq, events);
        sent.add(b);
        return b;
    }

    @Test
    void eventsInOrderUpdateAndRemoveEntries() {
        KvEventFeed f = feed(true);
        f.accept(send(1, 0, stored("a"), stored("b")));
        f.accept(send(1, 1, removed("a")));
        assertFalse(index.holds(0, "a", true));
        assertTrue(index.holds(0, "b", true));
        assertEquals(3, metrics.events.sum());
        assertEquals(0, metrics.gaps.sum());
    }

    @Test
    void aGapResynchronisesFromTheReplayWithTheMissedMessages() {
        KvEventFeed f = feed(true);
        f.accept(send(1, 0, stored("a")));
        send(1, 1, stored("b")); // lost on the way
        send(1, 2, removed("a")); // lost too
        f.accept(send(1, 3, stored("c")));
        assertEquals(1, metrics.gaps.sum());
        assertEquals(List.of(1L), replayRequests.subList(replayRequests.size() - 1, replayRequests.size()));
        assertFalse(index.holds(0, "a", true));
        assertTrue(index.holds(0, "b", true));
        assertTrue(index.holds(0, "c", true));
        assertEquals(0, metrics.resyncFallbacks.sum());
        f.accept(send(1, 4, stored("d")));
        assertTrue(index.holds(0, "d", true));
        assertEquals(1, metrics.gaps.sum());
    }

    @Test
    void aGapWithoutReplayDropsThePublishersEntriesAndRebuildsFromTheNextEvents() {
        KvEventFeed f = feed(false);
        f.accept(batch(1, 0, stored("a")));
        f.accept(batch(1, 5, stored("z")));
        assertEquals(1, metrics.gaps.sum());
        assertEquals(1, metrics.resyncFallbacks.sum());
        assertFalse(index.holds(0, "a", true), "a stale entry survived a gap");
        assertTrue(index.holds(0, "z", true));
    }

    @Test
    void aSnapshotAnswersAGapWhoseMessagesAreGone() {
        KvEventFeed f = new KvEventFeed("e", 0, index, metrics, (from, each) -> each.accept(
                batch(0, 9, new KvEvent.AllCleared(0, 9, "e"), stored("b"), stored("c"))));
        f.accept(batch(1, 0, stored("a")));
        f.accept(batch(1, 10, stored("d")));
        assertFalse(index.holds(0, "a", true));
        assertTrue(index.holds(0, "b", true) && index.holds(0, "c", true) && index.holds(0, "d", true));
        assertEquals(0, metrics.resyncFallbacks.sum());
    }

    @Test
    void aNewEpochIsARestartThatForgetsTheOldEntriesAndReplaysTheNewEpoch() {
        KvEventFeed f = feed(true);
        f.accept(send(1, 0, stored("a")));
        f.accept(send(1, 1, stored("b")));
        sent.clear(); // the restarted publisher has only its own messages
        send(2, 0, stored("c"));
        f.accept(send(2, 1, stored("d")));
        assertEquals(1, metrics.epochChanges.sum());
        assertFalse(index.holds(0, "a", true));
        assertFalse(index.holds(0, "b", true));
        assertTrue(index.holds(0, "c", true), "the new epoch's first message came through the replay");
        assertTrue(index.holds(0, "d", true));
        assertEquals(0, metrics.gaps.sum());
    }

    @Test
    void duplicatedAndOutOfOrderMessagesAreCountedAndIgnored() {
        KvEventFeed f = feed(true);
        f.accept(send(1, 0, stored("a")));
        f.accept(send(1, 1, removed("a")));
        f.accept(batch(1, 1, removed("a")));
        f.accept(batch(1, 0, stored("a")));
        assertEquals(1, metrics.duplicates.sum());
        assertEquals(1, metrics.outOfOrder.sum());
        assertFalse(index.holds(0, "a", true), "the late 'stored' brought back a removed chunk");
        f.malformed(new MalformedEventException("bad"));
        assertEquals(1, metrics.malformed.sum());
    }
}
