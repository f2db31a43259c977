package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The prefix index: which publishers hold which chunks, in their cache or the shared store. */
class PrefixIndexTest {
    private static final String[] PROMPT = {"a", "b", "c", "d"};

    @Test
    void matchFindsEachPublishersLeadingRunAndTheStoresLeadingRun() {
        PrefixIndex index = new PrefixIndex();
        index.stored(0, "a", false);
        index.stored(0, "b", false);
        index.stored(0, "d", false); // not after a gap: "c" is missing, so it does not count
        index.stored(3, "a", false);
        index.stored(1, "a", true);
        index.stored(1, "b", true);
        index.stored(1, "c", true);
        int[] local = new int[PrefixIndex.MAX_PUBLISHERS];
        assertEquals(3, index.match(PROMPT, local));
        assertEquals(2, local[0]);
        assertEquals(1, local[3]);
        assertEquals(0, local[1], "publisher 1 stored into the store, not its own cache");
        index.stored(1, "d", true);
        assertEquals(4, index.match(PROMPT, local));
        assertEquals(4, index.size());
        assertEquals(4, index.storeChunks());
    }

    @Test
    void aStoreRemovalRemovesTheChunkForEveryoneAndALocalOneOnlyForItsPublisher() {
        PrefixIndex index = new PrefixIndex();
        index.stored(0, "a", true);
        index.stored(1, "a", true);
        index.stored(0, "b", false);
        index.stored(2, "b", false);
        index.removed(2, "a", true);
        assertFalse(index.holds(0, "a", true));
        assertFalse(index.holds(1, "a", true));
        index.removed(2, "b", false);
        assertTrue(index.holds(0, "b", false));
        assertFalse(index.holds(2, "b", false));
        index.removed(0, "b", false);
        assertEquals(0, index.size(), "an entry nobody holds is gone");
        index.removed(5, "never-seen", true);
        assertEquals(0, index.size());
    }

    @Test
    void clearForgetsOnePublishersReportsOnly() {
        PrefixIndex index = new PrefixIndex();
        index.stored(0, "a", false);
        index.stored(1, "a", false);
        index.stored(0, "b", true);
        index.clear(0);
        assertFalse(index.holds(0, "a", false));
        assertTrue(index.holds(1, "a", false));
        assertEquals(1, index.size());
    }

    @Test
    void theSharedStoreIsAStoreUriOtherThanAnInProcessMemoryStore() {
        assertTrue(PrefixIndex.isSharedStore("shm:/dev/shm/kv"));
        assertTrue(PrefixIndex.isSharedStore("valkey://10.0.0.9:6379"));
        assertFalse(PrefixIndex.isSharedStore("memory:?capacity=1GiB"));
        assertFalse(PrefixIndex.isSharedStore("GPU"));
        assertFalse(PrefixIndex.isSharedStore(null));
    }
}
