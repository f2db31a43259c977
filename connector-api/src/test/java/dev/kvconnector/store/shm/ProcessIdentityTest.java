package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ProcessIdentityTest {
    @Test
    void thisProcessIsAliveAndItsTokenCarriesItsPid() {
        assertTrue(ProcessIdentity.isAlive(ProcessIdentity.SELF));
        assertEquals(ProcessHandle.current().pid(), ProcessIdentity.pid(ProcessIdentity.SELF));
        assertNotEquals(0, ProcessIdentity.SELF >>> 32, "the start time is readable on Linux");
    }

    @Test
    void aLivePidWithAnotherStartTimeIsAReusedPidAndCountsAsDead() throws Exception {
        Process p = new ProcessBuilder("sleep", "30").start();
        try {
            long token = ProcessIdentity.tokenOf(p.toHandle());
            assertTrue(ProcessIdentity.isAlive(token));
            long reused = ((token >>> 32) + 1 & 0xFFFF_FFFFL) << 32 | ProcessIdentity.pid(token);
            assertFalse(ProcessIdentity.isAlive(reused));
        } finally {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aKilledProcessIsDead() throws Exception {
        Process p = new ProcessBuilder("sleep", "30").start();
        long token;
        try {
            token = ProcessIdentity.tokenOf(p.toHandle());
        } finally {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
        assertFalse(ProcessIdentity.isAlive(token));
        assertFalse(ProcessIdentity.isAlive(0));
    }
}
