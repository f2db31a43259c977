package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Recorder;

/**
 * Open-loop load: {@code clients} threads, each on its own keep-alive connection ({@link RawHttpConnection}), each
 * sending one request every {@code clients / perSecond} s, its body the next of {@code requests}, without waiting for
 * a slow answer to shift the schedule: each latency, in ns, counts from when the request was due, so a stall shows in
 * full in the requests queued behind it (no coordinated omission).
 */
final class OpenLoopClients implements AutoCloseable {
    /** The highest latency recorded, in ns: 60 s. */
    static final long HIGHEST = 60_000_000_000L;
    final Recorder latency = new Recorder(HIGHEST, 3);
    final AtomicLong reconnects = new AtomicLong();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final List<Thread> threads = new ArrayList<>();
    private volatile boolean running = true;

    OpenLoopClients(String proxyAddr, List<byte[]> requests, int clients, long perSecond) {
        long interval = 1_000_000_000L * clients / perSecond;
        long start = System.nanoTime();
        for (int c = 0; c < clients; c++) {
            long first = start + interval * c / clients;
            int client = c;
            threads.add(Thread.ofPlatform().name("open-loop-client-" + c).start(() -> {
                RawHttpConnection conn = new RawHttpConnection(proxyAddr, reconnects);
                try {
                    for (long i = 0; running; i++) {
                        long due = first + i * interval;
                        LockSupport.parkNanos(due - System.nanoTime());
                        conn.exchange(requests.get((int) ((i * clients + client) % requests.size())), false);
                        latency.recordValue(Math.min(System.nanoTime() - due, HIGHEST));
                    }
                } catch (IOException | RuntimeException e) {
                    failure.compareAndSet(null, e);
                } finally {
                    conn.close();
                }
            }));
        }
    }

    /** Stops the clients; throws if a request failed. */
    @Override
    public void close() throws Exception {
        running = false;
        for (Thread t : threads) {
            t.join();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a request failed: " + failure.get(), failure.get());
        }
    }
}
