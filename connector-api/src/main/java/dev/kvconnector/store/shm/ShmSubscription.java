package dev.kvconnector.store.shm;

import dev.kvconnector.error.ErrorHandler;
import dev.kvconnector.store.StoreEvent;
import dev.kvconnector.store.StoreEventListener;
import dev.kvconnector.store.SubscriptionThread;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * A subscription to an {@code shm:} store's events: one thread ({@code kvconnector-events-shm-N}) that polls the
 * file's event ring ({@link EventReceiver}) and hands each record to the listener as a {@link StoreEvent}. Between
 * records it backs off as Agrona's {@link BackoffIdleStrategy} does (spins, yields, then parks from 1 us doubling to
 * {@link #MAX_PARK_MICROS}), so an event reaches the listener within about that long and an idle subscription costs
 * a wake-up per park. The events of every process that writes the file arrive, in the order of the ring.
 *
 * <p>The ring lies in the file's tables, so before each poll the thread asks the file's size, as every call of the
 * store does ({@link CallGate}): once another process has truncated the file into the tables, it hands the error
 * handler a {@code CORRUPT_OBJECT} naming the file and delivers nothing more; a fault of a truncation racing a poll
 * is named the same way. That costs an {@code fstat} per poll (at most 256 records), about 0.2 us.
 */
final class ShmSubscription extends SubscriptionThread {
    /** Longest park between polls of an idle ring, in us: the added latency of an event after a quiet spell. */
    static final long MAX_PARK_MICROS = 2_000;
    private static final int BATCH = 256;
    private static final StoreEvent.Type[] TYPES = {null, StoreEvent.Type.STORED, StoreEvent.Type.REMOVED,
        StoreEvent.Type.EVICTED, StoreEvent.Type.EXPIRED};

    private final String uri;
    private final long epoch;
    private final EventReceiver receiver;
    private final ShmFile file;

    /**
     * Starts at the ring's tail: the listener hears of every change made after this constructor returns.
     *
     * @param epoch the file's event epoch
     * @param onClose called once when the subscription closes, so the store forgets it
     */
    ShmSubscription(String uri, long epoch, ShmFile file, EventReceiver receiver, StoreEventListener listener,
                    ErrorHandler errors, Consumer<SubscriptionThread> onClose) {
        super("shm", uri, listener, errors, onClose);
        this.uri = uri;
        this.epoch = epoch;
        this.file = file;
        this.receiver = receiver;
    }

    void start() {
        startThread();
    }

    @Override
    protected void run() {
        IdleStrategy idle = new BackoffIdleStrategy(10, 5, TimeUnit.MICROSECONDS.toNanos(1),
                TimeUnit.MICROSECONDS.toNanos(MAX_PARK_MICROS));
        while (running()) {
            try {
                long size = file.size().now();
                if (!file.size().holdsTables(size)) {
                    report("polling the event ring of " + uri, file.size().cutShort(size, "subscribe", null, null));
                    return;
                }
                idle.idle(receiver.poll(this::deliver, BATCH));
            } catch (InternalError fault) {
                report("polling the event ring of " + uri, file.size().named(fault, "subscribe", null));
                return;
            } catch (RuntimeException e) {
                if (running()) {
                    report("polling the event ring of " + uri, e);
                    idle.idle(0);
                }
            }
        }
    }

    private void deliver(int type, long sequence, long bytes, String key) {
        if (type >= 1 && type < TYPES.length) {
            deliver(new StoreEvent(epoch, sequence, TYPES[type], uri, key, bytes));
        }
    }

    /** Times the writers lapped this subscription (each shows as a gap in the sequence). */
    long laps() {
        return receiver.laps();
    }
}
