package dev.kvconnector.store.tiered;

import java.util.concurrent.atomic.LongAdder;

/** What one tier of a {@link TieredStore} served and took in; counters only, updated without allocating. */
public final class TierStats {
    private final String uri;
    private final LongAdder hits = new LongAdder();
    private final LongAdder errors = new LongAdder();
    private final LongAdder promotions = new LongAdder();
    private final LongAdder bytesRead = new LongAdder();
    private final LongAdder bytesWritten = new LongAdder();
    private final LongAdder dropped = new LongAdder();

    TierStats(String uri) {
        this.uri = uri;
    }

    void hit(long bytes) {
        hits.increment();
        bytesRead.add(bytes);
    }

    void error() {
        errors.increment();
    }

    void promoted(long bytes) {
        promotions.increment();
        bytesWritten.add(bytes);
    }

    void written(long bytes) {
        bytesWritten.add(bytes);
    }

    void dropped() {
        dropped.increment();
    }

    /** @param queued what the write-back queue holds for this tier now */
    Snapshot snapshot(int queued) {
        return new Snapshot(uri, hits.sum(), errors.sum(), promotions.sum(), bytesRead.sum(), bytesWritten.sum(),
                dropped.sum(), queued);
    }

    /**
     * One tier's counters since the store opened.
     *
     * @param uri          the tier's URI, secrets masked
     * @param hits         reads this tier served (a read served by a tier above never reaches it)
     * @param errors       calls to this tier that threw
     * @param promotions   objects copied into this tier from a tier below on a hit
     * @param bytesRead    bytes of the objects this tier served
     * @param bytesWritten bytes put into this tier: by puts, write-backs and promotions
     * @param dropped      write-backs and removal retries meant for this tier that were dropped (a full queue, or
     *                     left at close): the tier misses those objects, or keeps them
     * @param queued       write-backs and removal retries that this tier has yet to take now (its part of the
     *                     write-back queue's depth)
     */
    public record Snapshot(String uri, long hits, long errors, long promotions, long bytesRead, long bytesWritten,
                           long dropped, int queued) {
    }
}
