package dev.kvconnector.store.shm;

/**
 * The test hooks' settings ({@link ShmStore#PROP_PUT_PAUSE_MS} and the others), read once; 0 (off) unless a test
 * sets them, so the JIT folds every hook away.
 */
final class ShmTestHooks {
    /** Pause half-way through each put's copy, in ms. */
    static final long PUT_PAUSE_MS = Long.getLong(ShmStore.PROP_PUT_PAUSE_MS, 0);
    /** Pause half-way through each hit's copy, lease held, in ms. */
    static final long GET_PAUSE_MS = Long.getLong(ShmStore.PROP_GET_PAUSE_MS, 0);
    /** Pause in each put while it holds the store lock, in ms. */
    static final long LOCK_PAUSE_MS = Long.getLong(ShmStore.PROP_LOCK_PAUSE_MS, 0);
    /** Pause half-way through writing each event record, holding the store lock, in ms. */
    static final long EVENT_PAUSE_MS = Long.getLong(ShmStore.PROP_EVENT_PAUSE_MS, 0);

    private ShmTestHooks() {
    }

    /** Sleeps {@code millis} ms; the multi-process tests look for this frame to know a child is in its pause. */
    static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
