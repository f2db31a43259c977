package dev.kvconnector.connector;

import java.util.ArrayDeque;

/**
 * Idle objects of a connector kept for reuse, so that a steady stream of requests makes none: whoever takes one owns
 * it until it gives it back. At most {@code max} are kept; more in use at once are made and dropped. Thread-safe.
 *
 * @param <T> the objects
 */
final class IdlePool<T> {
    private final ArrayDeque<T> idle = new ArrayDeque<>();
    private final int max;

    IdlePool(int max) {
        this.max = max;
    }

    /** An idle object, now the caller's; or null when none is kept. */
    T poll() {
        synchronized (idle) {
            return idle.pollFirst();
        }
    }

    /** Keeps {@code t}, which its owner no longer uses, unless {@code max} are kept already. */
    void offer(T t) {
        synchronized (idle) {
            if (idle.size() < max) {
                idle.addFirst(t);
            }
        }
    }
}
