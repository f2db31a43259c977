package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.DropSession;
import org.junit.jupiter.api.Test;

class StoreWaitsTest {
    /** A load that records whether it was abandoned. */
    private static final class Load implements DropSession {
        String abandoned;

        @Override
        public boolean awaitLayer(int layer) {
            return false;
        }

        @Override
        public DropResult result() {
            return null;
        }

        @Override
        public boolean abandon(String why) {
            abandoned = why;
            return true;
        }

        @Override
        public void close() {
        }
    }

    @Test
    void aNoticeEndsTheLoadWaitingForItsTransferOnly() {
        StoreWaits waits = new StoreWaits();
        Load t1 = new Load();
        Load t2 = new Load();
        waits.began("t1", t1);
        waits.began("t2", t2);

        assertTrue(waits.givenUp("t1"));

        assertTrue(t1.abandoned.contains("t1") && t1.abandoned.contains("gave up"), t1.abandoned);
        assertNull(t2.abandoned);
    }

    @Test
    void aNoticeBeforeItsLoadBeganIsHeldAndEndsTheLoadWhenItBegins() {
        StoreWaits waits = new StoreWaits();
        Load late = new Load();

        assertFalse(waits.givenUp("t1"), "no load waits yet: the notice is held");
        waits.began("t1", late);

        assertTrue(late.abandoned.contains("before this load began"), late.abandoned);
        Load again = new Load();
        waits.ended("t1", late);
        waits.began("t1", again);
        assertNull(again.abandoned, "a held notice ends one load");
    }

    @Test
    void aNoticeForALoadThatEndedIsHeldAndHeldNoticesAreBounded() {
        StoreWaits waits = new StoreWaits();
        Load done = new Load();
        waits.began("t0", done);
        waits.ended("t0", done);
        assertFalse(waits.givenUp("t0"));
        assertNull(done.abandoned);

        for (int i = 1; i <= StoreWaits.HELD_MAX; i++) {
            waits.givenUp("t" + i);
        }
        Load oldest = new Load();
        Load newest = new Load();
        waits.began("t0", oldest);
        waits.began("t" + StoreWaits.HELD_MAX, newest);
        assertNull(oldest.abandoned, "the oldest notice went first once " + StoreWaits.HELD_MAX + " were held");
        assertTrue(newest.abandoned != null, "the newest notice is held");
    }
}
