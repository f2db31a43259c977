package dev.kvconnector.store.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ShmLockTest {
    private final ShmPartsBench b = new ShmPartsBench(1 << 16, 64, 16, true);
    private final ShmLock lock = b.lock;

    @AfterEach
    void close() {
        b.close();
    }

    @Test
    void theLockWordHoldsTheOwnersToken() {
        assertEquals(0, lock.owner());
        lock.lock();
        assertEquals(ProcessIdentity.SELF, lock.owner());
        assertFalse(lock.tryLock(), "not reentrant");
        lock.unlock();
        assertTrue(lock.tryLock());
        lock.unlock();
        assertEquals(0, lock.owner());
    }

    @Test
    void aLiveHolderMakesWaitersTimeOutNamingItsPid() {
        long parent = ProcessIdentity.tokenOf(ProcessHandle.current().parent().orElseThrow());
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_LOCK, parent);
        KVException e = assertThrows(KVException.class, lock::lock);
        assertEquals(ErrorCode.TIMEOUT, e.code());
        assertTrue(e.getMessage().contains("process " + ProcessIdentity.pid(parent))
                && e.getMessage().contains("/parts-bench") && e.getMessage().contains("200 ms"), e.getMessage());
        assertEquals(parent, lock.owner(), "a live holder's lock is never taken over");
    }

    @Test
    void aDeadHoldersLockIsTakenOverAndTheStoreRepairedOnlyThen() {
        b.commit("k", 64, 0);
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_USED_BLOCKS, 999);
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_LOCK, ShmPartsBench.DEAD);
        lock.lock();
        assertEquals(ProcessIdentity.SELF, lock.owner());
        assertEquals(1, b.blocks.usedBlocks(), "the takeover rebuilt what the dead holder may have half-changed");
        lock.unlock();
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_USED_BLOCKS, 999);
        lock.lock();
        lock.unlock();
        assertEquals(999, b.blocks.usedBlocks(), "a lock released properly needs no repair");
    }

    @Test
    void tryLockNeverWaits() {
        b.map.set(ValueLayout.JAVA_LONG, ShmLayout.H_LOCK, ShmPartsBench.DEAD);
        assertFalse(lock.tryLock(), "not even for a dead holder: taking over is for waiters");
    }
}
