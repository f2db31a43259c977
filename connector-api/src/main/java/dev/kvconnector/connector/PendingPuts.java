package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One insert's puts in flight on the connector's I/O threads: counts them, keeps the first failure for commit (and
 * hands it to the connector's error handler once), and gives pooled staging back once a put is done.
 * {@link #acquire} waits for these puts when the staging pool is full.
 */
final class PendingPuts {
    private final StoreConnector connector;
    /** What the puts are, for the error handler: {@code layer put}, {@code chunk put}. */
    private final String what;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final Object lock = new Object();
    private int pending;

    PendingPuts(StoreConnector connector, String what) {
        this.connector = connector;
        this.what = what;
    }

    /** Pooled staging of at least {@code bytes}; when the pool is full, waits for this insert's puts first. */
    MemorySegment acquire(long bytes) {
        MemorySegment s = connector.staging().tryAcquire(bytes);
        if (s != null) {
            return s;
        }
        await();
        return connector.staging().acquire(bytes);
    }

    /**
     * Puts {@code keys}/{@code values} asynchronously, then releases {@code release} (pooled staging, or null when
     * the caller releases the values' memory after {@link #await}).
     */
    void submit(String[] keys, MemorySegment[] values, MemorySegment release) {
        begin();
        connector.executePut(() -> {
            try {
                connector.store().putBatch(keys, values, keys.length, connector.putOptions(), new boolean[keys.length]);
            } catch (Throwable t) {
                failed(t);
            } finally {
                if (release != null) {
                    connector.staging().release(release);
                }
                done();
            }
        });
    }

    /** Counts a put that the caller runs on the connector's I/O threads and ends with {@link #done}. */
    void begin() {
        synchronized (lock) {
            pending++;
        }
    }

    /** Ends a put counted by {@link #begin}, failed or not. */
    void done() {
        synchronized (lock) {
            pending--;
            lock.notifyAll();
        }
    }

    /** Records a put's failure: the first is kept for commit and given to the connector's error handler. */
    void failed(Throwable t) {
        if (failure.compareAndSet(null, t)) {
            connector.onIoError(what + " (the insert aborts at commit) to", t);
        }
    }

    /** Waits until every submitted put is done. */
    void await() {
        synchronized (lock) {
            while (pending > 0) {
                try {
                    lock.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw KVException.of(ErrorCode.INTERNAL, "interrupted while waiting for puts")
                            .store(connector.endpoint()).operation("insert").cause(e).build();
                }
            }
        }
    }

    /** Forgets the failure of an ended insert, whose puts are all done, for the next request of its session. */
    void reset() {
        failure.set(null);
    }

    /** The first put failure, or null. */
    Throwable failure() {
        return failure.get();
    }
}
