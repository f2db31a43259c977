package dev.kvconnector.mooncake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

/**
 * {@link MooncakeStore#liveStores()}, which the test kit's LeakCheck reads: a store counts from its open until its
 * arenas close, once however often it is closed.
 */
class MooncakeStoreLiveStoresTest {
    @Test
    void aStoreCountsFromOpenUntilCloseAndASecondCloseCountsNothing() {
        MooncakeTestTarget target = MooncakeTestTarget.require();
        long before = MooncakeStore.liveStores();
        MooncakeStore store = target.open("");
        try {
            assertEquals(before + 1, MooncakeStore.liveStores());
        } finally {
            store.close();
        }
        assertEquals(before, MooncakeStore.liveStores());
        store.close();
        assertEquals(before, MooncakeStore.liveStores());
    }

    @Test
    void aStoreWhoseSetupFailsIsNeverCounted() {
        MooncakeTestTarget target = MooncakeTestTarget.require();
        assumeTrue(target.isDouble(), "the double's setup refuses port 0; a real store's may not");
        long before = MooncakeStore.liveStores();
        try {
            target.open("&local_hostname=127.0.0.1:0");
        } catch (KVException expected) {
            assertEquals("setup", expected.operation(), "failed before the store opened its arenas: " + expected);
            assertEquals(before, MooncakeStore.liveStores(), expected.toString());
            return;
        }
        throw new AssertionError("the setup took local_hostname 127.0.0.1:0");
    }
}
