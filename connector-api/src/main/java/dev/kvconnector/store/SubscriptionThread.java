package dev.kvconnector.store;

import dev.kvconnector.error.ErrorHandler;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The thread of a store's event subscription, for stores to build theirs on: it runs {@link #run()} until the
 * subscription closes, hands events to the listener so that a listener that throws goes to the error handler and
 * never ends the thread, and closes once, waking and joining the thread. Threads are named
 * {@code kvconnector-events-KIND-N}.
 */
public abstract class SubscriptionThread implements StoreSubscription {
    private static final AtomicInteger THREADS = new AtomicInteger();

    private final String uri;
    private final StoreEventListener listener;
    private final ErrorHandler errors;
    private final Consumer<SubscriptionThread> onClose;
    private final Thread thread;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile boolean running = true;

    /**
     * @param kind the store kind in the thread's name ({@code shm}, {@code valkey})
     * @param uri the store's URI, masked, for the error handler
     * @param onClose called once the thread has stopped, so the store forgets the subscription
     */
    protected SubscriptionThread(String kind, String uri, StoreEventListener listener, ErrorHandler errors,
                                 Consumer<SubscriptionThread> onClose) {
        this.uri = uri;
        this.listener = listener;
        this.errors = errors;
        this.onClose = onClose;
        this.thread = Thread.ofPlatform().daemon().name("kvconnector-events-" + kind + "-" + THREADS.incrementAndGet())
                .unstarted(this::run);
    }

    /** The subscription's work: deliver events while {@link #running()}; return once it is false. */
    protected abstract void run();

    /** Wakes {@link #run()} from what it blocks on, other than a park (which {@link #close()} unparks). */
    protected void wake() {
    }

    /** Starts the thread. */
    protected final void startThread() {
        thread.start();
    }

    /** Whether the subscription is open. */
    protected final boolean running() {
        return running;
    }

    /** Hands {@code event} to the listener; a listener that throws goes to the error handler. */
    protected final void deliver(StoreEvent event) {
        try {
            listener.onEvent(event);
        } catch (RuntimeException e) {
            report("event listener of " + uri, e);
        }
    }

    /** Hands a failure on this thread to the error handler; a handler that throws is ignored. */
    protected final void report(String where, RuntimeException e) {
        try {
            errors.onError(where, e);
        } catch (RuntimeException ignored) {
            // The handler failing too must not end the subscription; there is no one else to tell.
        }
    }

    /** Stops the deliveries: wakes the thread and waits for it (unless called from it); idempotent. */
    @Override
    public final void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        running = false;
        wake();
        LockSupport.unpark(thread);
        if (Thread.currentThread() != thread) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        onClose.accept(this);
    }
}
