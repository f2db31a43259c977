package dev.kvconnector.store.tiered;

/**
 * The write-back's counters since the store opened.
 *
 * @param depth       objects waiting or going out now
 * @param capacity    the queue's bound
 * @param written     objects written to every lower tier
 * @param dropped     waiting write-backs dropped: the oldest, from a full queue, and those left at close
 * @param lost        write-backs whose object the first tier no longer held when its turn came
 * @param failed      write-backs that failed (retried, unless the object can never fit the buffer)
 * @param refused     puts refused because the queue was full ({@code write-back-overflow=refuse})
 * @param lastFailure what the last failed write said, or null
 */
public record WriteBackStats(int depth, int capacity, long written, long dropped, long lost, long failed, long refused,
                             String lastFailure) {
}
