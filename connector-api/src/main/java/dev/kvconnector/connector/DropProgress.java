package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The progress of one drop-select, shared by the thread that loads it and the threads that wait on it: layers
 * loaded so far, then one result (a hit or a miss) or one failure, which every waiter receives. Thread-safe.
 */
final class DropProgress {
    private static final Logger LOG = LoggerFactory.getLogger(DropProgress.class);
    private final StoreConnector connector;
    private final boolean streaming;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition progress = lock.newCondition();
    private int layersLoaded;
    private DropResult result;
    private Throwable failure;
    private boolean done;

    /**
     * @param streaming whether the load runs on an I/O thread (layer-wise): its failure then also goes to the
     *     connector's error handler, since no caller's stack sees it
     */
    DropProgress(StoreConnector connector, boolean streaming) {
        this.connector = connector;
        this.streaming = streaming;
    }

    /** Runs {@code load}, records its result in the metrics, then publishes the result or failure to the waiters. */
    void run(Supplier<DropResult> load) {
        DropResult r = null;
        Throwable f = null;
        try {
            r = load.get();
        } catch (Throwable t) {
            f = t;
        }
        if (r != null) {
            // Counted before any waiter sees it: metrics() after result() returns includes this result.
            connector.metricsRecorder().recordResult(r);
        }
        lock.lock();
        try {
            result = r;
            failure = f;
            done = true;
            progress.signalAll();
        } finally {
            lock.unlock();
        }
        if (r != null) {
            if (!r.isHit()) {
                LOG.debug("drop-select missed on {}: {} ({})", connector.endpoint(), r.reason(), r.detail());
            }
        } else if (streaming) {
            connector.onIoError("layer-wise drop-select (its awaitLayer and result throw it) from", f);
        }
    }

    /** Forgets an ended load, for the next request of its session. */
    void reset() {
        lock.lock();
        try {
            layersLoaded = 0;
            result = null;
            failure = null;
            done = false;
        } finally {
            lock.unlock();
        }
    }

    /** Layers {@code 0..layer} are in the destination. */
    void layerLoaded(int layer) {
        lock.lock();
        try {
            layersLoaded = layer + 1;
            progress.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** As {@link DropSession#awaitLayer}. */
    boolean awaitLayer(int layer) {
        lock.lock();
        try {
            while (layersLoaded <= layer && !done) {
                progress.awaitUninterruptibly();
            }
            if (layersLoaded > layer) {
                return true;
            }
            rethrowFailure();
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** As {@link DropSession#result}. */
    DropResult result() {
        lock.lock();
        try {
            awaitDone();
            rethrowFailure();
            return result;
        } finally {
            lock.unlock();
        }
    }

    /** Whether the load has finished, whatever its outcome. */
    boolean isDone() {
        lock.lock();
        try {
            return done;
        } finally {
            lock.unlock();
        }
    }

    /** Waits until the load has finished, whatever its outcome. */
    void awaitDone() {
        lock.lock();
        try {
            while (!done) {
                progress.awaitUninterruptibly();
            }
        } finally {
            lock.unlock();
        }
    }

    private void rethrowFailure() {
        if (failure instanceof KVException ke) {
            throw ke;
        }
        if (failure != null) {
            throw KVException.of(ErrorCode.INTERNAL, "drop-select failed: " + failure).store(connector.endpoint())
                    .operation("dropSelect").cause(failure).build();
        }
    }
}
