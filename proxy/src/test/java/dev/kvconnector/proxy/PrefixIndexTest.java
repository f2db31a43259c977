package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
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

    @Test
    void randomUpdatesAgreeWithAPlainMapThroughGrowthAndBackwardShifts() {
        PrefixIndex index = new PrefixIndex();
        Map<String, long[]> model = new HashMap<>();
        Random random = new Random(7);
        for (int op = 0; op < 200_000; op++) {
            // 3,000 keys over 64 stripes: runs collide, stripes grow, and removals shift entries back.
            String hash = String.format("%016x", random.nextInt(3_000) * 0x9E3779B97F4A7C15L);
            int publisher = random.nextInt(4);
            boolean store = random.nextInt(4) == 0;
            long[] m = model.computeIfAbsent(hash, h -> new long[2]);
            if (random.nextInt(5) < 3) {
                index.stored(publisher, hash, store);
                m[store ? 1 : 0] |= 1L << publisher;
            } else {
                index.removed(publisher, hash, store);
                if (store) {
                    m[1] = 0;
                } else {
                    m[0] &= ~(1L << publisher);
                }
            }
            if ((m[0] | m[1]) == 0) {
                model.remove(hash);
            }
            if (op % 20_000 == 0) {
                index.clear(3);
                model.values().forEach(v -> {
                    v[0] &= ~8L;
                    v[1] &= ~8L;
                });
                model.values().removeIf(v -> (v[0] | v[1]) == 0);
            }
        }
        assertEquals(model.size(), index.size());
        for (int k = 0; k < 3_000; k++) {
            String hash = String.format("%016x", k * 0x9E3779B97F4A7C15L);
            long[] m = model.getOrDefault(hash, new long[2]);
            for (int p = 0; p < 4; p++) {
                assertEquals((m[0] & (1L << p)) != 0, index.holds(p, hash, false), hash + " local " + p);
                assertEquals((m[1] & (1L << p)) != 0, index.holds(p, hash, true), hash + " store " + p);
            }
        }
    }

    @Test
    void aReaderAlwaysFindsAChunkThatIsThereThroughItsLookupWhileOthersComeAndGo() throws Exception {
        PrefixIndex index = new PrefixIndex();
        // The writer keeps a window of 20,000 chunks: step n stores chunk n and removes chunk n - 20,000 (of a
        // cycle of 40,000 names). Every stripe grows, and each removal shifts the entries after it in its run back.
        int window = 20_000;
        String[] churn = new String[2 * window];
        Arrays.setAll(churn, n -> String.format("%016x", n * 0x9E3779B97F4A7C15L));
        AtomicLong steps = new AtomicLong();
        AtomicBoolean writing = new AtomicBoolean(true);
        Thread writer = Thread.ofPlatform().start(() -> {
            for (long n = 0; writing.get(); n++) {
                index.stored(1, churn[(int) (n % churn.length)], false);
                index.removed(1, churn[(int) ((n + window) % churn.length)], false);
                steps.set(n + 1);
            }
        });
        AtomicReference<String> wrong = new AtomicReference<>();
        long reads = 0;
        long end = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < end && wrong.get() == null) {
            long before = steps.get();
            if (before < window) {
                continue;
            }
            // The middle of the window: stored before this lookup, removed only once the writer is half a window on.
            long chunk = before - window / 2;
            boolean found = index.holds(1, churn[(int) (chunk % churn.length)], false);
            long after = steps.get();
            if (!found && after < chunk + window) {
                wrong.set("chunk " + chunk + " missed, present from step " + chunk + " to " + (chunk + window)
                        + " and looked up between steps " + before + " and " + after);
            }
            reads++;
        }
        writing.set(false);
        writer.join();
        assertEquals(null, wrong.get());
        assertTrue(reads > 1_000, reads + " lookups");
        assertTrue(steps.get() > 2L * window, "the writer took " + steps.get() + " steps");
    }
}
