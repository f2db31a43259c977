package dev.kvconnector.cuda;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;

/**
 * Double-buffered device-to-host staging of a request's layers for a host store: while layer {@code i} is being
 * put from one staging buffer, layer {@code i + 1} is already copying from the device into the other.
 *
 * <p>Order, for layers {@code 0..n-1} and buffers {@code i % 2}:
 * <pre>
 *   startCopy(0, 0)
 *   for i in 0..n-1:
 *     startCopy(i + 1, (i + 1) % 2)   // that buffer's last user, put(i - 1), has returned
 *     awaitCopy(i % 2)
 *     put(i, i % 2)
 * </pre>
 * A staging buffer is written by a copy only after the put that read it returned, and read by a put only after
 * its copy completed. When a put or copy fails, the copy still in flight is awaited before the failure propagates,
 * so no DMA writes into a buffer the caller may reuse.
 *
 * <p>The three steps are a {@link Stages} so the order can be checked without a GPU; {@link PinnedLayerStaging}
 * implements them with pinned buffers, a stream and events.
 */
public final class LayerStagingPipeline {
    /** Staging buffers in flight: one being put, one being filled. */
    public static final int BUFFERS = 2;

    private LayerStagingPipeline() {
    }

    /** The three steps of staging one layer. */
    public interface Stages {
        /** Enqueues the copy of {@code layer} into staging {@code buffer} and returns without waiting for it. */
        void startCopy(int layer, int buffer);

        /** Returns once the copy last started into {@code buffer} has completed. */
        void awaitCopy(int buffer);

        /** Stores {@code layer} from {@code buffer}; the buffer may be reused once this returns. */
        void put(int layer, int buffer);
    }

    /** Stages and puts layers {@code 0..layers-1} in order, overlapping each put with the next layer's copy. */
    public static void run(int layers, Stages stages) {
        if (layers < 0) {
            throw KVException.of(ErrorCode.INVALID_ARGUMENT, "layers=" + layers + " is negative").build();
        }
        if (layers == 0) {
            return;
        }
        boolean[] pending = new boolean[BUFFERS];
        try {
            stages.startCopy(0, 0);
            pending[0] = true;
            for (int i = 0; i < layers; i++) {
                int buffer = i % BUFFERS;
                if (i + 1 < layers) {
                    int next = (i + 1) % BUFFERS;
                    stages.startCopy(i + 1, next);
                    pending[next] = true;
                }
                pending[buffer] = false;
                stages.awaitCopy(buffer);
                stages.put(i, buffer);
            }
        } catch (RuntimeException | Error e) {
            drain(stages, pending, e);
            throw e;
        }
    }

    /**
     * After a failure, waits for every copy that was started and not yet awaited. A copy whose start threw was not
     * enqueued, and a buffer whose await threw is not awaited again.
     */
    private static void drain(Stages stages, boolean[] pending, Throwable failure) {
        for (int b = 0; b < BUFFERS; b++) {
            if (pending[b]) {
                try {
                    stages.awaitCopy(b);
                } catch (RuntimeException | Error suppressed) {
                    failure.addSuppressed(suppressed);
                }
            }
        }
    }
}
