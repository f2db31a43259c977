package dev.kvconnector.demo;

import dev.kvconnector.connector.DropSession;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * D, loading layer-wise through a store: the loads that wait for their producer, by transfer id, and the proxy's
 * notices that a transfer's prefill was given up (every P it tried failed). A notice ends the waiting load at once
 * ({@link DropSession#abandon}), so that D recomputes instead of waiting for its layer timeout; a notice for a load
 * not begun yet is held ({@link #HOLD_NANOS}, at most {@link #HELD_MAX}) and ends that load as soon as it begins.
 * Thread-safe.
 */
final class StoreWaits {
    /** How long a notice waits for its load to begin: 30 s. */
    static final long HOLD_NANOS = 30_000_000_000L;
    /** Notices held at most; the oldest goes first. */
    static final int HELD_MAX = 1024;

    private final Map<String, DropSession> waiting = new HashMap<>();
    /** Held notices: transfer id to the time they expire ({@link System#nanoTime()}), oldest first. */
    private final LinkedHashMap<String, Long> held = new LinkedHashMap<>();

    /** The load of {@code transferId} began as {@code drop}; it ends at once when its notice came first. */
    synchronized void began(String transferId, DropSession drop) {
        Long expires = held.remove(transferId);
        if (expires != null && System.nanoTime() - expires < 0) {
            drop.abandon("the proxy gave up the prefill of transfer " + transferId + " before this load began");
        }
        waiting.put(transferId, drop);
    }

    /** The load of {@code transferId} ended. */
    synchronized void ended(String transferId, DropSession drop) {
        waiting.remove(transferId, drop);
    }

    /**
     * The proxy gave up the prefill of {@code transferId}.
     *
     * @return true when no load waits for it any more (the waiting one was ended, or had just ended); false when
     *     the notice is held for a load not begun
     */
    synchronized boolean givenUp(String transferId) {
        DropSession drop = waiting.get(transferId);
        if (drop != null) {
            drop.abandon("the proxy gave up the prefill of transfer " + transferId + " (every P it tried failed)");
            return true;
        }
        long now = System.nanoTime();
        held.values().removeIf(expires -> now - expires >= 0);
        Iterator<String> oldest = held.keySet().iterator();
        while (held.size() >= HELD_MAX && oldest.hasNext()) {
            oldest.next();
            oldest.remove();
        }
        held.put(transferId, now + HOLD_NANOS);
        return false;
    }
}
