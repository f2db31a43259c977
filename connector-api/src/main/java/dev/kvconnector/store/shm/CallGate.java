package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counts the calls in flight on one store instance, so that the close waits for them before it unmaps the file, and
 * turns every call after the close into {@code CLOSED}, naming the file.
 */
final class CallGate {
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder inFlight = new LongAdder();
    private final Path path;
    private final String uri;

    CallGate(Path path, String uri) {
        this.path = path;
        this.uri = uri;
    }

    /**
     * Counts a call in flight.
     *
     * @throws KVException CLOSED once {@link #close()} has begun
     */
    void enter(String op) {
        if (!enterIfOpen()) {
            throw closedError(op, null);
        }
    }

    /** Counts a call in flight, as {@link #enter} does, unless the store is closed; returns whether it counted. */
    boolean enterIfOpen() {
        inFlight.increment();
        if (closed.get()) {
            inFlight.decrement();
            return false;
        }
        return true;
    }

    void exit() {
        inFlight.decrement();
    }

    boolean isClosed() {
        return closed.get();
    }

    /** Closes the gate and waits until no call is in flight; false when it was closed already. */
    boolean close() {
        if (!closed.compareAndSet(false, true)) {
            return false;
        }
        while (inFlight.sum() != 0) {
            Thread.onSpinWait();
        }
        return true;
    }

    KVException closedError(String op, String key) {
        return KVException.of(ErrorCode.CLOSED, "this instance of the store in " + path + " is closed").store(uri)
                .operation(op).key(key).build();
    }
}
