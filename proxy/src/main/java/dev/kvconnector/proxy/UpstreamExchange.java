package dev.kvconnector.proxy;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One request to an upstream instance, read by a (virtual) thread with deadlines.
 *
 * <p>The JDK client's {@code InputStream} body cannot be unblocked from another thread, so the body arrives
 * through this subscriber into a queue instead: the reader waits with a deadline (first byte, total), and
 * {@link #cancel()} (timeout, client gone, request done elsewhere) cancels the subscription, which makes the
 * client close the connection, so the instance sees the request abandoned. One buffer list is requested at
 * a time, so a slow client slows the upstream read instead of filling memory.
 */
final class UpstreamExchange implements Flow.Subscriber<List<ByteBuffer>> {
    private static final Object END = new Object();

    final Instance instance;
    final long startNanos;
    private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
    private volatile Flow.Subscription subscription;
    private volatile boolean cancelled;
    private volatile CompletableFuture<HttpResponse<Void>> future;
    private boolean released;
    private HttpHeaders headers;

    private UpstreamExchange(Instance instance) {
        this.instance = instance;
        this.startNanos = System.nanoTime();
    }

    /** Sends the request; the instance's outstanding count is held until {@link #release()}. */
    static UpstreamExchange send(HttpClient client, Instance instance, HttpRequest request) {
        UpstreamExchange ex = new UpstreamExchange(instance);
        instance.outstanding.incrementAndGet();
        ex.future = client.sendAsync(request, info -> {
            ex.queue.add(info);
            return HttpResponse.BodySubscribers.fromSubscriber(ex);
        });
        ex.future.whenComplete((r, t) -> {
            if (t != null) {
                ex.queue.add(t);
            }
        });
        return ex;
    }

    /**
     * Waits for the status line and headers until {@code deadlineNanos} ({@link System#nanoTime()} based).
     *
     * @return the HTTP status
     * @throws UpstreamFailure when the instance failed or the deadline passed
     */
    int awaitHeaders(long deadlineNanos) throws UpstreamFailure, InterruptedException {
        Object item = take(deadlineNanos, "response headers");
        if (item instanceof HttpResponse.ResponseInfo info) {
            headers = info.headers();
            return info.statusCode();
        }
        throw unexpected(item);
    }

    String header(String name) {
        return headers == null ? null : headers.firstValue(name).orElse(null);
    }

    /**
     * Returns the next buffers of the body, or null at its end.
     *
     * @throws UpstreamFailure when the instance failed or the deadline passed
     */
    @SuppressWarnings("unchecked")
    List<ByteBuffer> next(long deadlineNanos) throws UpstreamFailure, InterruptedException {
        Object item = take(deadlineNanos, "response body");
        if (item == END) {
            return null;
        }
        if (item instanceof List<?> list) {
            Flow.Subscription s = subscription;
            if (s != null) {
                s.request(1);
            }
            return (List<ByteBuffer>) list;
        }
        throw unexpected(item);
    }

    /** Reads the whole body into one array of at most {@code maxBytes} bytes. */
    byte[] readAll(long deadlineNanos, long maxBytes) throws UpstreamFailure, InterruptedException {
        var out = new java.io.ByteArrayOutputStream();
        List<ByteBuffer> bufs;
        while ((bufs = next(deadlineNanos)) != null) {
            for (ByteBuffer b : bufs) {
                if (out.size() + (long) b.remaining() > maxBytes) {
                    cancel();
                    throw new UpstreamFailure(instance, "answer larger than " + maxBytes + " bytes", false);
                }
                if (b.hasArray()) {
                    out.write(b.array(), b.arrayOffset() + b.position(), b.remaining());
                } else {
                    byte[] tmp = new byte[b.remaining()];
                    b.get(tmp);
                    out.write(tmp, 0, tmp.length);
                }
            }
        }
        return out.toByteArray();
    }

    /** Drains and drops the body (the V0 prefill answer), still bounded by the deadline. */
    void discardBody(long deadlineNanos) throws UpstreamFailure, InterruptedException {
        while (next(deadlineNanos) != null) {
            // The buffers are dropped: only the prefill's side effect in the KV store matters.
        }
    }

    /** Abandons the exchange: the connection is closed and the instance sees the request go away. */
    void cancel() {
        cancelled = true;
        Flow.Subscription s = subscription;
        if (s != null) {
            s.cancel();
        }
        CompletableFuture<?> f = future;
        if (f != null) {
            f.cancel(true);
        }
    }

    /**
     * Gives back the instance's outstanding slot; idempotent, so it can be called as soon as the upstream
     * answer is complete (before the client has it) and again in finally.
     */
    void release() {
        if (!released) {
            released = true;
            instance.outstanding.decrementAndGet();
        }
    }

    double elapsedSeconds() {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    private Object take(long deadlineNanos, String what) throws UpstreamFailure, InterruptedException {
        long wait = deadlineNanos - System.nanoTime();
        Object item = wait <= 0 ? queue.poll() : queue.poll(wait, TimeUnit.NANOSECONDS);
        if (item == null) {
            cancel();
            throw new UpstreamFailure(instance, "timed out waiting for " + what, true);
        }
        return item;
    }

    private UpstreamFailure unexpected(Object item) {
        cancel();
        if (item instanceof Throwable t) {
            Throwable cause = t instanceof java.util.concurrent.CompletionException && t.getCause() != null
                    ? t.getCause() : t;
            boolean unreachable = cause instanceof java.net.ConnectException
                    || cause instanceof java.net.http.HttpConnectTimeoutException;
            return new UpstreamFailure(instance, describe(cause), false, unreachable);
        }
        return new UpstreamFailure(instance, "unexpected " + item, false);
    }

    private static String describe(Throwable t) {
        if (t instanceof java.net.ConnectException) {
            return "connection refused or unreachable (is the instance up and the port right?)";
        }
        if (t instanceof java.net.http.HttpConnectTimeoutException) {
            return "connect timed out (host down or firewalled?)";
        }
        if (t instanceof IOException && t.getMessage() != null) {
            return t.getClass().getSimpleName() + ": " + t.getMessage();
        }
        return t.toString();
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
        subscription = s;
        if (cancelled) {
            s.cancel();
        } else {
            s.request(1);
        }
    }

    @Override
    public void onNext(List<ByteBuffer> item) {
        queue.add(item);
    }

    @Override
    public void onError(Throwable t) {
        queue.add(t);
    }

    @Override
    public void onComplete() {
        queue.add(END);
    }
}
