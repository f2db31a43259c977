package dev.kvconnector.connector;

/**
 * One request's drop-select. Whole-request ({@link KVStoreConnector#dropSelect}) it reads a committed entry only.
 * Layer-wise ({@link KVStoreConnector#beginDropSelect}) it starts before the producer commits: layer {@code i} is
 * loaded as soon as it has arrived, while the engine waits in {@link #awaitLayer(int)} just before it needs that
 * layer; the hidden states and the commit are awaited last.
 *
 * <pre>{@code
 * try (DropSession drop = connector.beginDropSelect(request, DropTarget.paged(cache, blockTable).withHidden(h))) {
 *     for (int layer = 0; layer < layers; layer++) {
 *         if (!drop.awaitLayer(layer)) break;       // a miss: drop.result() says why; recompute
 *         engine.useLayer(layer);
 *     }
 *     DropResult r = drop.result();
 * }
 * }</pre>
 */
public interface DropSession extends AutoCloseable {
    /**
     * Waits until layer {@code layer} is in the target, or the load ended without it.
     *
     * @return true when the layer is loaded; false on a miss ({@link #result()} says why)
     * @throws dev.kvconnector.error.KVException when the load failed (a backend error), as opposed to missing
     */
    boolean awaitLayer(int layer);

    /**
     * Waits for the whole load (layers, commit, hidden states, consume) and returns its outcome.
     *
     * @throws dev.kvconnector.error.KVException when the load failed (a backend error), as opposed to missing
     */
    DropResult result();

    /**
     * Stops waiting for a producer that will not come (the proxy gave its prefill up): a layer-wise load still waiting
     * for an object ends at once as an {@link MissReason#ABSENT} miss naming {@code why}, instead of at its layer
     * timeout; what arrived before stays loaded. A load that waits for nothing (whole-request) or has ended is
     * unchanged.
     *
     * @return true when the load had not ended and stops waiting; false when there was nothing to stop (and for a
     *     session that cannot stop early, which then ends at its timeout)
     */
    default boolean abandon(String why) {
        return false;
    }

    /**
     * Waits for the load to end, so no copy into the target runs after this returns. It does not throw the load's
     * failure (that is {@link #result()}'s job), so a try-with-resources block never suppresses its own exception.
     */
    @Override
    void close();
}
