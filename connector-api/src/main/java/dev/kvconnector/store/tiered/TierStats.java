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

    Snapshot snapshot() {
        return new Snapshot(uri, hits.sum(), errors.sum(), promotions.sum(), bytesRead.sum(), bytesWritten.sum());
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
     */
    public record Snapshot(String uri, long hits, long errors, long promotions, long bytesRead, long bytesWritten) {
    }
}
