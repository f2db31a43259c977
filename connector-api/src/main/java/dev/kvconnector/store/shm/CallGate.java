package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * Admits calls to one store instance's mapping. It counts the calls in flight, so that the close waits for them before
 * it unmaps the file, and turns every call after the close into {@code CLOSED}, naming the file. And it asks the
 * file's size ({@link ShmFileSize#now()}) as each call enters, so that no call touches a mapping whose file another
 * process has truncated into the store's tables ({@link ShmFileSize} says why that must be checked before, not caught
 * after). The size it returns lets the call check the payload it is about to touch against the same figure.
 */
final class CallGate {
    /** {@link #tryEnter()}'s answer for a call it did not admit. */
    static final long REFUSED = -1;

    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder inFlight = new LongAdder();
    private final ShmFile file;
    private final String uri;

    CallGate(ShmFile file, String uri) {
        this.file = file;
        this.uri = uri;
    }

    /**
     * Counts a call in flight.
     *
     * @param key the key the call is about, named only in the error, or null
     * @return the file's size in bytes as the call enters, at least the store's tables (the payload may be cut)
     * @throws KVException CLOSED once {@link #close()} has begun; CORRUPT_OBJECT when the file was truncated into the
     *     tables (nothing is counted then)
     */
    long enter(String op, KeyScratch key) {
        long size = tryEnter();
        if (size >= 0) {
            return size;
        }
        throw closed.get() ? closedError(op, key) : file.size().cutShort(file.size().now(), op, key, null);
    }

    /**
     * Counts a call in flight, as {@link #enter} does, unless the store is closed or its file cut into the tables:
     * for the calls that must not throw then (an abort, a release), which only empty their handle.
     *
     * @return the file's size in bytes, or {@link #REFUSED} (nothing counted)
     */
    long tryEnter() {
        inFlight.increment();
        if (closed.get()) {
            inFlight.decrement();
            return REFUSED;
        }
        long size = file.size().now();
        if (!file.size().holdsTables(size)) {
            inFlight.decrement();
            return REFUSED;
        }
        return size;
    }

    /**
     * Checks, without counting a call, that the store is open and its file still covers its first {@code end} bytes:
     * what a claim's or a view's {@code segment()} asks before it hands out a slice of the mapping.
     *
     * @throws KVException CLOSED after the close; CORRUPT_OBJECT when the file is now shorter than {@code end}
     */
    void requireCovers(long end, String op, KeyScratch key) {
        if (closed.get()) {
            throw closedError(op, key);
        }
        long size = file.size().now();
        if (size < end && closed.get()) {
            // A close racing this check has closed the file whose size was asked: that is the answer, not a cut.
            throw closedError(op, key);
        }
        file.size().requireCovers(size, end, op, key);
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

    KVException closedError(String op, KeyScratch key) {
        return KVException.of(ErrorCode.CLOSED, "this instance of the store in " + file.path() + " is closed")
                .store(uri).operation(op).key(KeyScratch.textOf(key)).build();
    }
}
