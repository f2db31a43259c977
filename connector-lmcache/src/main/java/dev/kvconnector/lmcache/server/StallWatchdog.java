package dev.kvconnector.lmcache.server;

import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Closes a connection whose payload transfer (a PUT's payload coming in, a GET's reply going out) makes no progress
 * for the payload timeout, so that a client that announces a large PUT and then sends nothing cannot hold its
 * reservation, or a GET's value, forever. A blocking read or write on the closed channel then fails at once, and
 * the connection's handler gives back what the transfer held.
 *
 * <p>One virtual thread sweeps every watch a few times per timeout. Between transfers (a connection idle between
 * requests, as pooled clients are) nothing is timed.
 */
final class StallWatchdog implements AutoCloseable {
    /** The transfer state of one connection, updated by its handler thread and read by the sweeper. */
    static final class Watch {
        private final SocketChannel channel;
        private volatile String transfer;
        private volatile long lastProgressNanos;
        private volatile long bytesSoFar;
        private volatile boolean stalled;

        private Watch(SocketChannel channel) {
            this.channel = channel;
        }

        /** Starts timing a transfer; {@code what} names it in the log, such as "PUT of key k (5 bytes)". */
        void begin(String what) {
            bytesSoFar = 0;
            lastProgressNanos = System.nanoTime();
            transfer = what;
        }

        /** Records progress: {@code bytes} moved so far in this transfer. */
        void progress(long bytes) {
            bytesSoFar = bytes;
            lastProgressNanos = System.nanoTime();
        }

        /** Stops timing: the transfer is complete. */
        void end() {
            transfer = null;
        }

        /** Whether the watchdog closed this connection for a stall. */
        boolean stalled() {
            return stalled;
        }

        /** The transfer that stalled (or is running), or null. */
        String transfer() {
            return transfer;
        }

        /** Bytes the current or stalled transfer had moved. */
        long bytesSoFar() {
            return bytesSoFar;
        }
    }

    private final long timeoutNanos;
    private final Set<Watch> watches = ConcurrentHashMap.newKeySet();
    private final Thread sweeper;
    private volatile boolean running = true;

    /** Starts the sweeper; {@code timeoutMillis} is the longest a transfer may make no progress, in ms (above 0). */
    StallWatchdog(long timeoutMillis, String name) {
        this.timeoutNanos = TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        long periodMillis = Math.clamp(timeoutMillis / 4, 5, 1_000);
        this.sweeper = Thread.ofVirtual().name(name).start(() -> sweep(periodMillis));
    }

    /** Watches a connection until {@link #unwatch}. */
    Watch watch(SocketChannel channel) {
        Watch w = new Watch(channel);
        watches.add(w);
        return w;
    }

    /** Stops watching a connection. */
    void unwatch(Watch w) {
        watches.remove(w);
    }

    private void sweep(long periodMillis) {
        while (running) {
            try {
                Thread.sleep(periodMillis);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            for (Watch w : watches) {
                if (w.transfer != null && now - w.lastProgressNanos > timeoutNanos) {
                    w.stalled = true;
                    try {
                        w.channel.close();
                    } catch (IOException e) {
                        // The handler's read or write fails either way; nothing else holds the channel.
                    }
                }
            }
        }
    }

    /** Stops the sweeper. */
    @Override
    public void close() {
        running = false;
        sweeper.interrupt();
    }
}
