package dev.kvconnector.proxy;

import java.util.concurrent.atomic.DoubleAdder;
import java.util.concurrent.atomic.LongAdder;

/** A Prometheus histogram with fixed buckets in seconds; recording is lock- and allocation-free. */
final class Histogram {
    /** Upper bounds in seconds, from a fast first byte to a long generation. */
    static final double[] BOUNDS = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

    private final LongAdder[] buckets = new LongAdder[BOUNDS.length];
    private final LongAdder count = new LongAdder();
    private final DoubleAdder sum = new DoubleAdder();

    Histogram() {
        for (int k = 0; k < buckets.length; k++) {
            buckets[k] = new LongAdder();
        }
    }

    void record(double seconds) {
        for (int k = 0; k < BOUNDS.length; k++) {
            if (seconds <= BOUNDS[k]) {
                buckets[k].increment();
                break;
            }
        }
        count.increment();
        sum.add(seconds);
    }

    /** Appends the cumulative {@code _bucket}, {@code _sum} and {@code _count} lines. */
    void render(StringBuilder out, String name, String labels) {
        long cumulative = 0;
        for (int k = 0; k < BOUNDS.length; k++) {
            cumulative += buckets[k].sum();
            out.append(name).append("_bucket{").append(labels).append(",le=\"").append(BOUNDS[k]).append("\"} ")
                    .append(cumulative).append('\n');
        }
        long total = count.sum();
        out.append(name).append("_bucket{").append(labels).append(",le=\"+Inf\"} ").append(total).append('\n');
        out.append(name).append("_sum{").append(labels).append("} ").append(sum.sum()).append('\n');
        out.append(name).append("_count{").append(labels).append("} ").append(total).append('\n');
    }
}
