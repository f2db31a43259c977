package dev.kvconnector.proxy;

import org.apache.hc.client5.http.ConnectTimeoutException;
import org.apache.hc.client5.http.classic.methods.HttpPost;
import org.apache.hc.core5.http.ClassicHttpResponse;
import org.apache.hc.core5.http.Header;
import org.apache.hc.core5.http.HttpEntity;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.util.Arrays;

/**
 * One request to an upstream instance, sent and read by the (virtual) thread that serves the client, with
 * deadlines (first byte, total).
 *
 * <p>{@link UpstreamClient}'s sweeper aborts the exchange once its deadline passes; {@link #cancel()} (client gone,
 * request done elsewhere) aborts it too. Aborting closes the connection, so the instance sees the request abandoned.
 * The body is read as the caller asks for it, so a slow client slows the upstream read instead of filling memory.
 */
final class UpstreamExchange {
    final Instance instance;
    final long startNanos;
    private final UpstreamClient upstream;
    private final HttpPost request;
    private ClassicHttpResponse response;
    private InputStream body;
    private boolean ended;
    private boolean released;
    private volatile boolean timedOut;
    private volatile long deadline;
    /** Null until the first deadline is set; written after {@link #deadline}, so a reader seeing it sees that. */
    private volatile String waitingFor;

    private UpstreamExchange(UpstreamClient upstream, Instance instance, HttpPost request) {
        this.upstream = upstream;
        this.instance = instance;
        this.request = request;
        this.startNanos = System.nanoTime();
    }

    /**
     * Prepares the request; it goes out in {@link #awaitHeaders(long)}. The instance's outstanding count is
     * held until {@link #release()}.
     */
    static UpstreamExchange send(UpstreamClient upstream, Instance instance, HttpPost request) {
        instance.outstanding.incrementAndGet();
        UpstreamExchange ex = new UpstreamExchange(upstream, instance, request);
        upstream.track(ex);
        return ex;
    }

    /**
     * Sends the request and waits for the status line and headers until {@code deadlineNanos}
     * ({@link System#nanoTime()} based).
     *
     * @return the HTTP status
     * @throws UpstreamFailure when the instance failed or the deadline passed
     */
    int awaitHeaders(long deadlineNanos) throws UpstreamFailure, InterruptedException {
        arm(deadlineNanos, "response headers");
        try {
            response = upstream.http.executeOpen(null, request, null);
            HttpEntity entity = response.getEntity();
            if (entity == null) {
                ended = true;
            } else {
                body = entity.getContent();
            }
        } catch (IOException e) {
            throw failure(e);
        }
        return response.getCode();
    }

    String header(String name) {
        Header h = response == null ? null : response.getFirstHeader(name);
        return h == null ? null : h.getValue();
    }

    /**
     * Reads the next bytes of the body into {@code buf}, as many as have arrived (at least one).
     *
     * @return the number of bytes read, or -1 at the end of the body
     * @throws UpstreamFailure when the instance failed or the deadline passed
     */
    int read(byte[] buf, long deadlineNanos) throws UpstreamFailure, InterruptedException {
        return read(buf, 0, deadlineNanos);
    }

    /** Reads the whole body into one array of at most {@code maxBytes} bytes. */
    byte[] readAll(long deadlineNanos, long maxBytes) throws UpstreamFailure, InterruptedException {
        byte[] out = new byte[1024];
        int size = 0;
        while (true) {
            if (size == out.length) {
                out = Arrays.copyOf(out, out.length * 2);
            }
            int n = read(out, size, deadlineNanos);
            if (n < 0) {
                return Arrays.copyOf(out, size);
            }
            size += n;
            if (size > maxBytes) {
                cancel();
                throw new UpstreamFailure(instance, "answer larger than " + maxBytes + " bytes", false);
            }
        }
    }

    private int read(byte[] buf, int offset, long deadlineNanos) throws UpstreamFailure, InterruptedException {
        if (ended) {
            return -1;
        }
        arm(deadlineNanos, "response body");
        int n;
        try {
            n = body.read(buf, offset, buf.length - offset);
        } catch (IOException e) {
            throw failure(e);
        }
        if (n < 0) {
            ended = true;
        }
        return n;
    }

    /** Drains and drops the body (the V0 prefill answer), still bounded by the deadline. */
    void discardBody(long deadlineNanos) throws UpstreamFailure, InterruptedException {
        byte[] scratch = new byte[1024];
        while (read(scratch, deadlineNanos) >= 0) {
            // The bytes are dropped: only the prefill's side effect in the KV store matters.
        }
    }

    /** Abandons the exchange: the connection is closed and the instance sees the request go away. */
    void cancel() {
        request.cancel();
    }

    /**
     * Gives back the instance's outstanding slot and the connection (to the pool when the body was read to its
     * end, closed otherwise); idempotent, so it can be called as soon as the upstream answer is complete
     * (before the client has it) and again in finally.
     */
    void release() {
        if (released) {
            return;
        }
        released = true;
        instance.outstanding.decrementAndGet();
        upstream.untrack(this);
        if (!ended) {
            request.cancel();
        }
        if (response != null) {
            try {
                response.close();
            } catch (IOException ignored) {
                // Closing a connection that is given up on anyway: nothing is lost.
            }
        }
    }

    double elapsedSeconds() {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    /** From now on, the exchange is aborted at {@code deadlineNanos}. */
    private void arm(long deadlineNanos, String what) throws UpstreamFailure {
        deadline = deadlineNanos;
        waitingFor = what;
        if (deadlineNanos - System.nanoTime() <= 0) {
            cancel();
            throw new UpstreamFailure(instance, "timed out waiting for " + what, true);
        }
    }

    /** Called by the sweeper: aborts the exchange when its deadline has passed. */
    void abortIfPastDeadline(long nowNanos) {
        if (waitingFor != null && !timedOut && nowNanos - deadline >= 0) {
            timedOut = true;
            request.cancel();
        }
    }

    private UpstreamFailure failure(IOException e) throws InterruptedException {
        cancel();
        if (Thread.currentThread().isInterrupted()) {
            throw new InterruptedException("interrupted while waiting for " + waitingFor + " from " + instance);
        }
        if (timedOut) {
            return new UpstreamFailure(instance, "timed out waiting for " + waitingFor, true);
        }
        if (e instanceof ConnectException || e instanceof ConnectTimeoutException) {
            return new UpstreamFailure(instance, describe(e), false, true);
        }
        if (e instanceof SocketTimeoutException) {
            return new UpstreamFailure(instance, "timed out waiting for " + waitingFor, true);
        }
        return new UpstreamFailure(instance, describe(e), false);
    }

    private static String describe(IOException e) {
        if (e instanceof ConnectException) {
            return "connection refused or unreachable (is the instance up and the port right?)";
        }
        if (e instanceof ConnectTimeoutException) {
            return "connect timed out (host down or firewalled?)";
        }
        return e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
    }
}
