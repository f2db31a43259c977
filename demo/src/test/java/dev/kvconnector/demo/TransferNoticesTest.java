package dev.kvconnector.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.demo.TransferNotices.Notice;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

class TransferNoticesTest {
    @Test
    void aNoticeFindsTheLoadWaitingForItsTransferOnly() {
        TransferNotices<String> notices = new TransferNotices<>();
        notices.began("t1", "load 1");
        notices.began("t2", "load 2");

        assertSame("load 1", notices.waitingOrHold("t1", Notice.GIVEN_UP));
        assertSame("load 2", notices.waitingOrHold("t2", new Notice("127.0.0.1", 8100)));
    }

    @Test
    void aNoticeBeforeItsLoadBeganIsHeldAndHandedToTheLoadWhenItBegins() {
        TransferNotices<String> notices = new TransferNotices<>();
        Notice moved = new Notice("127.0.0.1", 8100);

        assertNull(notices.waitingOrHold("t1", moved), "no load waits yet: the notice is held");

        assertEquals(moved, notices.began("t1", "late load"));
        TransferNotices<String> again = new TransferNotices<>();
        again.waitingOrHold("t2", Notice.GIVEN_UP);
        assertEquals(Notice.GIVEN_UP, again.began("t2", "load"));
        assertNull(again.began("t3", "another load"), "a held notice is for its transfer only");
    }

    @Test
    void aNoticeForATransferWhoseLoadEndedIsRefusedNamingIt() {
        TransferNotices<String> notices = new TransferNotices<>();
        notices.began("t0", "load");
        notices.ended("t0", "load", "it missed (TIMED_OUT)");

        KVException e = assertThrows(KVException.class, () -> notices.waitingOrHold("t0", Notice.GIVEN_UP));

        assertEquals(ErrorCode.CLOSED, e.code());
        assertTrue(e.getMessage().contains("t0") && e.getMessage().contains("it missed (TIMED_OUT)")
                && e.getMessage().contains("was given up"), e.getMessage());
    }

    @Test
    void heldNoticesAreBoundedOldestFirst() {
        TransferNotices<String> notices = new TransferNotices<>();
        for (int i = 0; i <= TransferNotices.HELD_MAX; i++) {
            notices.waitingOrHold("t" + i, Notice.GIVEN_UP);
        }

        assertNull(notices.began("t0", "oldest"), "the oldest notice went first once " + TransferNotices.HELD_MAX
                + " were held");
        assertEquals(Notice.GIVEN_UP, notices.began("t" + TransferNotices.HELD_MAX, "newest"));
    }
}
