package dev.kvconnector.demo;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * D: its loads that wait for a producer, by transfer id, and the proxy's notices about their prefills (moved to
 * another P, or given up). A notice finds the load waiting for its transfer; one that comes before its load began is
 * held ({@link #HOLD_NANOS}, at most {@link #HELD_MAX}) and handed to the load when it begins; one for a transfer
 * whose load ended is refused by name. Thread-safe; the peer-to-peer transport and the layer-wise store loads each
 * keep one.
 *
 * @param <S> the loads
 */
final class TransferNotices<S> {
    /** How long a notice waits for its load to begin: 30 s. */
    static final long HOLD_NANOS = 30_000_000_000L;
    /** Notices held at most; the oldest goes first. */
    static final int HELD_MAX = 1024;
    /** Transfers remembered as ended, to refuse a late notice for one by name. */
    static final int ENDED_REMEMBERED = 4096;

    /**
     * A notice of the proxy about a transfer's prefill: it moved to the P at {@code host:port}, or ({@code host} null)
     * it was given up.
     */
    record Notice(String host, int port) {
        static final Notice GIVEN_UP = new Notice(null, 0);

        boolean givenUp() {
            return host == null;
        }

        @Override
        public String toString() {
            return host == null ? "was given up" : "moved to " + host + ":" + port;
        }
    }

    private record Held(Notice notice, long expiresNanos) {
    }

    private final Map<String, S> waiting = new HashMap<>();
    private final LinkedHashMap<String, Held> held = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Held> eldest) {
            return size() > HELD_MAX;
        }
    };
    private final LinkedHashMap<String, String> ended = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > ENDED_REMEMBERED;
        }
    };

    /** The load of {@code transferId} began: it now waits; returns the notice held for it, or null. */
    synchronized Notice began(String transferId, S load) {
        waiting.put(transferId, load);
        Held h = held.remove(transferId);
        return h == null || System.nanoTime() - h.expiresNanos >= 0 ? null : h.notice;
    }

    /** The load of {@code transferId} ended, for {@code why}: a later notice for the transfer is refused naming it. */
    synchronized void ended(String transferId, S load, String why) {
        waiting.remove(transferId, load);
        ended.put(transferId, why);
    }

    /**
     * The load waiting for {@code transferId}, for the caller to apply {@code notice} to; or null after holding the
     * notice for a load not begun.
     *
     * @throws KVException {@code CLOSED} naming the transfer when its load has ended
     */
    synchronized S waitingOrHold(String transferId, Notice notice) {
        S load = waiting.get(transferId);
        if (load != null) {
            return load;
        }
        String why = ended.get(transferId);
        if (why != null) {
            throw KVException.of(ErrorCode.CLOSED, "transfer " + transferId + ": D's request for it has ended (" + why
                    + "); the notice that its prefill " + notice + " comes too late")
                    .operation("prefill notice").key(transferId).build();
        }
        long now = System.nanoTime();
        held.values().removeIf(h -> now - h.expiresNanos >= 0);
        held.put(transferId, new Held(notice, now + HOLD_NANOS));
        return null;
    }
}
