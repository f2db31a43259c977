package dev.kvconnector.store.tiered;

/**
 * The write-back's counters since the store opened, with the removals that it retries.
 *
 * @param depth       write-backs and removals waiting or going out now
 * @param capacity    the queue's bound
 * @param written     objects written to every lower tier
 * @param dropped     waiting write-backs and removals dropped: the oldest, from a full queue, and those left at
 *                    close
 * @param lost        write-backs whose object the first tier no longer held when its turn came
 * @param failed      write-backs and removals that failed (retried, unless the object can never fit the buffer)
 * @param refused     puts refused because the queue was full ({@code write-back-overflow=refuse})
 * @param lastFailure what the last failed write or removal said, or null
 * @param removals    removals from the lower tiers waiting or going out now (in {@code depth} too): of objects a
 *                    reader consumed, which leave the lower tiers from the queue, and those a lower tier failed
 * @param removed     such removals the queue has since made in every tier
 */
public record WriteBackStats(int depth, int capacity, long written, long dropped, long lost, long failed, long refused,
                             String lastFailure, int removals, long removed) {
}
