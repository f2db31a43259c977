package dev.kvconnector.connector;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.ConcurrentHistogram;
import org.HdrHistogram.Histogram;

/**
 * The connector's counters: per-layer insert and drop latency and a layer-wise drop's wait for the producer
 * (HdrHistogram, nanoseconds, 3 significant digits),
 * bytes moved, hits, and misses by reason. Recording is wait-free and allocates nothing.
 */
public final class ConnectorMetrics {
    /** Values above one minute are recorded as one minute: sized up front so recording never resizes. */
    private static final long MAX_NANOS = 60_000_000_000L;
    private final ConcurrentHistogram insertLayerNanos = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final ConcurrentHistogram dropLayerNanos = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final ConcurrentHistogram dropWaitNanos = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final LongAdder insertedBytes = new LongAdder();
    private final LongAdder droppedBytes = new LongAdder();
    private final LongAdder commits = new LongAdder();
    private final LongAdder aborts = new LongAdder();
    private final LongAdder hits = new LongAdder();
    private final LongAdder partialHits = new LongAdder();
    private final EnumMap<MissReason, LongAdder> misses = new EnumMap<>(MissReason.class);

    ConnectorMetrics() {
        for (MissReason r : MissReason.values()) {
            misses.put(r, new LongAdder());
        }
    }

    void recordInsertLayer(long nanos, long bytes) {
        insertLayerNanos.recordValue(Math.clamp(nanos, 1, MAX_NANOS));
        insertedBytes.add(bytes);
    }

    void recordDropLayer(long nanos, long bytes) {
        dropLayerNanos.recordValue(Math.clamp(nanos, 1, MAX_NANOS));
        droppedBytes.add(bytes);
    }

    void recordDropWait(long nanos) {
        dropWaitNanos.recordValue(Math.clamp(nanos, 1, MAX_NANOS));
    }

    void recordCommit() {
        commits.increment();
    }

    void recordAbort() {
        aborts.increment();
    }

    void recordResult(DropResult r) {
        if (r.isComplete()) {
            hits.increment();
        } else if (r.isHit()) {
            partialHits.increment();
        } else {
            misses.get(r.reason()).increment();
        }
    }

    void reset() {
        insertLayerNanos.reset();
        dropLayerNanos.reset();
        dropWaitNanos.reset();
        for (LongAdder a : new LongAdder[] {insertedBytes, droppedBytes, commits, aborts, hits, partialHits}) {
            a.reset();
        }
        misses.values().forEach(LongAdder::reset);
    }

    /** A consistent-enough copy of every counter. */
    public Snapshot snapshot() {
        Map<MissReason, Long> m = new EnumMap<>(MissReason.class);
        misses.forEach((k, v) -> m.put(k, v.sum()));
        return new Snapshot(LatencySummary.of(insertLayerNanos.copy()), LatencySummary.of(dropLayerNanos.copy()),
                insertedBytes.sum(), droppedBytes.sum(), commits.sum(), aborts.sum(), hits.sum(), partialHits.sum(),
                Map.copyOf(m), LatencySummary.of(dropWaitNanos.copy()));
    }

    /**
     * Latency percentiles in nanoseconds (values above 60 s count as 60 s).
     *
     * @param count recorded values
     * @param p50Nanos median
     * @param p99Nanos 99th percentile
     * @param maxNanos maximum
     * @param meanNanos mean
     */
    public record LatencySummary(long count, long p50Nanos, long p99Nanos, long maxNanos, double meanNanos) {
        static LatencySummary of(Histogram h) {
            return new LatencySummary(h.getTotalCount(), h.getValueAtPercentile(50), h.getValueAtPercentile(99),
                    h.getMaxValue(), h.getTotalCount() == 0 ? 0 : h.getMean());
        }
    }

    /**
     * Every counter at one moment.
     *
     * @param insertLayer latency of one layer's insert (gather, encode and store put), in ns
     * @param dropLayer latency of one layer's drop-select (store get, validate and scatter), in ns; in a layer-wise
     *                  drop-select, without the time spent waiting for the producer to store the layer
     * @param insertedBytes bytes of objects put
     * @param droppedBytes bytes of objects read
     * @param commits committed inserts
     * @param aborts aborted inserts
     * @param hits drop-selects that loaded every token
     * @param partialHits drop-selects that loaded a prefix
     * @param misses drop-selects that loaded nothing, by reason
     * @param dropWait per layer of a layer-wise drop-select, the time spent polling for objects the producer had
     *                 not stored yet, in ns (1 ns when the layer was already there)
     */
    public record Snapshot(LatencySummary insertLayer, LatencySummary dropLayer, long insertedBytes, long droppedBytes,
                           long commits, long aborts, long hits, long partialHits, Map<MissReason, Long> misses,
                           LatencySummary dropWait) {
        /** Misses of every reason. */
        public long totalMisses() {
            return misses.values().stream().mapToLong(Long::longValue).sum();
        }
    }
}
