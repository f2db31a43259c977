package dev.kvconnector.valkey.resp;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded pool of {@link RespConnection}s to one server, with the watchdog thread that enforces the inactivity
 * timeout.
 *
 * <p>The pool holds a fixed number of slots. A slot connects lazily, on the first borrow, with up to
 * {@value #CONNECT_ATTEMPTS} attempts and an exponential back-off between them. A connection that saw any failure
 * (I/O error, timeout, malformed reply) is closed when it is released, never reused; such a failure also bumps the
 * pool's generation, so idle connections opened before it (likely dead too, when the server restarted) are
 * reopened on their next borrow instead of failing one call each.
 *
 * <p>Borrowing and releasing allocate nothing while connections stay healthy.
 */
public final class ConnectionPool implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConnectionPool.class);
    private static final int CONNECT_ATTEMPTS = 3;
    private static final long FIRST_BACKOFF_MILLIS = 20;

    private final Endpoint endpoint;
    private final RespSettings settings;
    private final RespConnection[] all;
    private final ArrayBlockingQueue<RespConnection> idle;
    private final AtomicLong generation = new AtomicLong();
    private final Thread watchdog;
    private volatile boolean closed;

    /** Creates the slots and starts the watchdog; connects nothing yet. */
    public ConnectionPool(Endpoint endpoint, RespSettings settings) {
        this.endpoint = endpoint;
        this.settings = settings;
        this.all = new RespConnection[settings.poolSize()];
        this.idle = new ArrayBlockingQueue<>(settings.poolSize());
        for (int i = 0; i < all.length; i++) {
            all[i] = new RespConnection(endpoint, settings);
            idle.add(all[i]);
        }
        if (settings.timeoutMillis() > 0) {
            watchdog = Thread.ofPlatform().daemon().name("kvc-resp-watchdog-" + endpoint.hostPort())
                    .unstarted(this::watch);
            watchdog.start();
        } else {
            watchdog = null;
        }
    }

    /**
     * Lends a connected connection and marks {@code op} on {@code key} as in flight. Waits up to the timeout for
     * a free one. Give it back with {@link #release}, in a finally block.
     */
    public RespConnection borrow(String op, String key) {
        RespConnection c = idle.poll();
        if (c == null) {
            c = awaitIdle(op, key);
        }
        if (closed) {
            idle.offer(c);
            throw closedError(op);
        }
        try {
            long gen = generation.get();
            if (!c.usable() || c.generation() != gen) {
                connect(c, gen);
            }
        } catch (RuntimeException e) {
            // The server is gone or changed: connections opened before are suspect too.
            generation.incrementAndGet();
            c.close();
            idle.offer(c);
            throw e;
        }
        c.inFlight().begin(op, key);
        return c;
    }

    /**
     * Takes a connection back. {@code clean} says the caller read every reply it asked for; a connection that is
     * not clean, or whose operation the watchdog expired, is closed.
     */
    public void release(RespConnection c, boolean clean) {
        boolean inTime = c.inFlight().end();
        if (!clean || !inTime || !c.usable() || closed || c.reader().hasBufferedBytes()) {
            if (!closed && (!clean || !inTime)) {
                generation.incrementAndGet();
                LOG.debug("discarding a connection to {} after a failure", endpoint.hostPort());
            }
            c.close();
        }
        idle.offer(c);
    }

    private RespConnection awaitIdle(String op, String key) {
        try {
            RespConnection c = idle.poll(Math.max(1, settings.timeoutMillis()), TimeUnit.MILLISECONDS);
            if (c == null) {
                throw KVException.of(ErrorCode.TIMEOUT, "all " + all.length + " connections to "
                                + endpoint.hostPort() + " stayed busy for " + settings.timeoutMillis() + " ms")
                        .store(endpoint.maskedUri()).operation(op).key(key)
                        .hint("raise pool= (now " + all.length + ") or lower the number of concurrent callers")
                        .build();
            }
            return c;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw KVException.of(ErrorCode.IO_ERROR, "interrupted while waiting for a connection to "
                    + endpoint.hostPort()).store(endpoint.maskedUri()).operation(op).key(key).cause(e).build();
        }
    }

    private void connect(RespConnection c, long gen) {
        long backoff = FIRST_BACKOFF_MILLIS;
        for (int attempt = 1; ; attempt++) {
            try {
                c.connect(gen);
                return;
            } catch (KVException e) {
                boolean retryable = e.code() == ErrorCode.STORE_UNREACHABLE;
                if (!retryable || attempt == CONNECT_ATTEMPTS || closed) {
                    throw e;
                }
                LOG.debug("connect to {} failed (attempt {} of {}), retrying in {} ms", endpoint.hostPort(),
                        attempt, CONNECT_ATTEMPTS, backoff);
                sleep(backoff);
                backoff *= 2;
            }
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void watch() {
        long tickNanos = TimeUnit.MILLISECONDS.toNanos(Math.clamp(settings.timeoutMillis() / 8, 5, 100));
        while (!closed) {
            // parkNanos rather than Thread.sleep, which allocates about 40 bytes per call on JDK 25: ten ticks a
            // second would be the store's only steady-state garbage. close() sets closed and unparks.
            LockSupport.parkNanos(this, tickNanos);
            if (closed || Thread.currentThread().isInterrupted()) {
                return;
            }
            long now = System.nanoTime();
            for (RespConnection c : all) {
                if (c.inFlight().expireIfStalled(now)) {
                    LOG.warn("no progress from {} for {} ms: closing the connection", endpoint.hostPort(),
                            settings.timeoutMillis());
                    c.abort();
                }
            }
        }
    }

    private KVException closedError(String op) {
        return KVException.of(ErrorCode.CLOSED, "the store was closed").store(endpoint.maskedUri()).operation(op)
                .build();
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return closed;
    }

    /** Closes every connection and stops the watchdog; calls in flight fail. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (RespConnection c : all) {
            c.close();
        }
        if (watchdog != null) {
            LockSupport.unpark(watchdog);
            try {
                watchdog.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
