package dev.kvconnector.benchmarks;

import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * Stalls of the JVM and the machine it runs on, as a platform thread that parks for 1 ms again and again sees them
 * (the idea of jHiccup): what it oversleeps is time no thread of this JVM could have run either, through a pause of
 * the JVM, the OS or the hypervisor. A benchmark reads {@link #interval()} per round, so a latency outlier can be
 * told apart from a round in which the machine stood still.
 *
 * <p>Run alone it checks a machine before a benchmark: {@code java -cp benchmarks/target/benchmarks.jar
 * dev.kvconnector.benchmarks.StallMeter [seconds]} prints each second's longest stall and how many parks overslept by
 * more than 1 ms.
 */
final class StallMeter implements AutoCloseable {
    private static final long PERIOD_NANOS = 1_000_000L;

    private final Recorder oversleep = new Recorder(60_000_000_000L, 3);
    private final Thread sampler;
    private volatile boolean running = true;

    StallMeter() {
        sampler = Thread.ofPlatform().daemon().name("stall-meter").start(this::sample);
    }

    private void sample() {
        while (running) {
            long t0 = System.nanoTime();
            LockSupport.parkNanos(PERIOD_NANOS);
            oversleep.recordValue(Math.max(0, Math.min(System.nanoTime() - t0 - PERIOD_NANOS, 60_000_000_000L)));
        }
    }

    /** The oversleep of each 1 ms park since the last call, in nanoseconds. */
    Histogram interval() {
        return oversleep.getIntervalHistogram();
    }

    public static void main(String[] args) throws InterruptedException {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        try (StallMeter meter = new StallMeter()) {
            for (int s = 1; s <= seconds; s++) {
                Thread.sleep(1000);
                Histogram h = meter.interval();
                System.out.printf("second %d: longest stall %.1f ms, stalls over 1 ms: %d of %d parks%n", s,
                        h.getMaxValue() / 1e6, h.getCountBetweenValues(1_000_001L, h.getMaxValue()),
                        h.getTotalCount());
            }
        }
    }

    @Override
    public void close() throws InterruptedException {
        running = false;
        sampler.join();
    }
}
