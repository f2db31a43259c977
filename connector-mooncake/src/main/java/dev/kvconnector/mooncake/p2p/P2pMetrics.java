package dev.kvconnector.mooncake.p2p;

import dev.kvconnector.connector.ConnectorMetrics;
import dev.kvconnector.connector.DropResult;
import dev.kvconnector.connector.MissReason;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.ConcurrentHistogram;
import org.HdrHistogram.Histogram;

/**
 * The peer-to-peer connector's counters, reported as a {@link ConnectorMetrics.Snapshot}: an insert layer is P's
 * gather and submit, a drop layer is D's check of the landed bytes, the drop wait is D's wait for the layer to land.
 * Recording is wait-free and allocates nothing.
 */
final class P2pMetrics {
    private static final long MAX_NANOS = 60_000_000_000L;
    private final ConcurrentHistogram insertLayer = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final ConcurrentHistogram dropLayer = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final ConcurrentHistogram dropWait = new ConcurrentHistogram(1, MAX_NANOS, 3);
    private final LongAdder insertedBytes = new LongAdder();
    private final LongAdder writeRequests = new LongAdder();
    private final LongAdder droppedBytes = new LongAdder();
    private final LongAdder commits = new LongAdder();
    private final LongAdder aborts = new LongAdder();
    private final LongAdder hits = new LongAdder();
    private final EnumMap<MissReason, LongAdder> misses = new EnumMap<>(MissReason.class);

    P2pMetrics() {
        for (MissReason r : MissReason.values()) {
            misses.put(r, new LongAdder());
        }
    }

    void insertLayer(long nanos, long bytes, int writes) {
        insertLayer.recordValue(Math.clamp(nanos, 1, MAX_NANOS));
        insertedBytes.add(bytes);
        writeRequests.add(writes);
    }

    /** WRITE requests P's layers needed (not in the snapshot: a count of how scattered D's blocks were). */
    long writeRequests() {
        return writeRequests.sum();
    }

    void dropLayer(long nanos, long waitNanos, long bytes) {
        dropLayer.recordValue(Math.clamp(nanos, 1, MAX_NANOS));
        dropWait.recordValue(Math.clamp(waitNanos, 1, MAX_NANOS));
        droppedBytes.add(bytes);
    }

    void commit() {
        commits.increment();
    }

    void abort() {
        aborts.increment();
    }

    void result(DropResult r) {
        if (r.isHit()) {
            hits.increment();
        } else {
            misses.get(r.reason()).increment();
        }
    }

    void reset() {
        insertLayer.reset();
        dropLayer.reset();
        dropWait.reset();
        for (LongAdder a : new LongAdder[] {insertedBytes, writeRequests, droppedBytes, commits, aborts, hits}) {
            a.reset();
        }
        misses.values().forEach(LongAdder::reset);
    }

    ConnectorMetrics.Snapshot snapshot() {
        Map<MissReason, Long> m = new EnumMap<>(MissReason.class);
        misses.forEach((k, v) -> m.put(k, v.sum()));
        return new ConnectorMetrics.Snapshot(summary(insertLayer.copy()), summary(dropLayer.copy()),
                insertedBytes.sum(), droppedBytes.sum(), commits.sum(), aborts.sum(), hits.sum(), 0, Map.copyOf(m),
                summary(dropWait.copy()));
    }

    private static ConnectorMetrics.LatencySummary summary(Histogram h) {
        return new ConnectorMetrics.LatencySummary(h.getTotalCount(), h.getValueAtPercentile(50),
                h.getValueAtPercentile(99), h.getMaxValue(), h.getTotalCount() == 0 ? 0 : h.getMean());
    }
}
