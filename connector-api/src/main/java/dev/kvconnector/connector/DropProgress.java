package dev.kvconnector.connector;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The progress of one drop-select, shared by the thread that loads it and the threads that wait on it: layers
 * loaded so far, then one result (a hit or a miss) or one failure, which every waiter receives. Thread-safe.
 *
 * <p>Waiters wait on this object's monitor rather than a {@code ReentrantLock}'s condition, which makes a node object
 * each time a thread blocks: a stream of layer-wise drop-selects then allocates nothing to wait.
 */
final class DropProgress {
    private static final Logger LOG = LoggerFactory.getLogger(DropProgress.class);
    private final StoreConnector connector;
    private final boolean streaming;
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
        synchronized (this) {
            result = r;
            failure = f;
            done = true;
            notifyAll();
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
    synchronized void reset() {
        layersLoaded = 0;
        result = null;
        failure = null;
        done = false;
    }

    /** Layers {@code 0..layer} are in the destination. */
    synchronized void layerLoaded(int layer) {
        layersLoaded = layer + 1;
        notifyAll();
    }

    /** As {@link DropSession#awaitLayer}. */
    synchronized boolean awaitLayer(int layer) {
        boolean interrupted = false;
        while (layersLoaded <= layer && !done) {
            interrupted |= waitOnce();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (layersLoaded > layer) {
            return true;
        }
        rethrowFailure();
        return false;
    }

    /** As {@link DropSession#result}. */
    synchronized DropResult result() {
        awaitDone();
        rethrowFailure();
        return result;
    }

    /** Whether the load has finished, whatever its outcome. */
    synchronized boolean isDone() {
        return done;
    }

    /** Waits until the load has finished, whatever its outcome. */
    synchronized void awaitDone() {
        boolean interrupted = false;
        while (!done) {
            interrupted |= waitOnce();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * One {@link #wait()} on the caller's hold of this monitor; whether an interrupt ended it (the waits go on, as
     * the lock's {@code awaitUninterruptibly} did, and set the interrupt flag again when they end).
     */
    private boolean waitOnce() {
        try {
            wait();
            return false;
        } catch (InterruptedException e) {
            return true;
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
