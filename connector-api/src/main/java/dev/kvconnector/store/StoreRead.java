package dev.kvconnector.store;

/**
 * A batch read sent and not yet answered ({@link KVStore#sendGetIntoBatch}): the store works on it while the caller
 * does something else, and {@link #await} reads the answers into the batch's destinations. Reused batch after
 * batch by one thread; every batch sent must be awaited, even when the caller no longer needs it.
 */
public interface StoreRead {
    /** Whether a batch was sent and not yet awaited. */
    boolean isPending();

    /**
     * Waits for the batch sent and reads it into its destinations; {@code results[i]} receives each
     * {@link GetResult} code as {@link KVStore#getIntoBatch} gives it. The handle is then free for the next batch.
     *
     * @throws dev.kvconnector.error.KVException as {@link KVStore#getIntoBatch} throws (the handle is free then too)
     */
    void await(long[] results);
}
