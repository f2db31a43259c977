package dev.kvconnector.valkey.resp;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * What one connection is doing now, shared between the thread doing the I/O and the watchdog that enforces
 * {@code timeout=}. The I/O thread marks progress after every read or write; the watchdog expires an operation
 * that made no progress for the timeout by moving it to TIMED_OUT and closing the channel, which wakes the
 * blocked thread. Allocation-free: the operation and key are references the caller already holds.
 */
public final class InFlight {
    private static final int IDLE = 0;
    private static final int BUSY = 1;
    private static final int TIMED_OUT = 2;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(InFlight.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long timeoutMillis;
    private volatile int state;
    private volatile long lastProgressNanos;
    private String operation;
    private String key;

    /** @param timeoutMillis how long an operation may go without progress, in ms; 0 disables the watchdog */
    public InFlight(long timeoutMillis) {
        this.timeoutMillis = timeoutMillis;
    }

    /** Starts an operation; {@code key} may be null. */
    public void begin(String op, String k) {
        this.operation = op;
        this.key = k;
        lastProgressNanos = System.nanoTime();
        state = BUSY;
    }

    /** Records that bytes moved. */
    void progress() {
        lastProgressNanos = System.nanoTime();
    }

    /** Ends the operation; false when the watchdog expired it first (the channel is then closed). */
    public boolean end() {
        if (STATE.compareAndSet(this, BUSY, IDLE)) {
            return true;
        }
        boolean wasTimedOut = state == TIMED_OUT;
        state = IDLE;
        return !wasTimedOut;
    }

    /** Called by the watchdog: expires a stalled operation; true when it did (the caller closes the channel). */
    boolean expireIfStalled(long nowNanos) {
        if (timeoutMillis <= 0 || state != BUSY) {
            return false;
        }
        if (nowNanos - lastProgressNanos < timeoutMillis * 1_000_000L) {
            return false;
        }
        return STATE.compareAndSet(this, BUSY, TIMED_OUT);
    }

    /** Whether the watchdog expired the current operation. */
    boolean timedOut() {
        return state == TIMED_OUT;
    }

    /** The operation in flight, for messages. */
    String operation() {
        return operation;
    }

    /** The key in flight, or null. */
    String key() {
        return key;
    }

    /** The inactivity timeout in ms. */
    long timeoutMillis() {
        return timeoutMillis;
    }
}
