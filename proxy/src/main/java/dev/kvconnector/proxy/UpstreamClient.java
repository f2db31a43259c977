package dev.kvconnector.proxy;

import org.apache.hc.client5.http.HttpRequestRetryStrategy;
import org.apache.hc.client5.http.classic.methods.HttpUriRequestBase;
import org.apache.hc.client5.http.config.ConnectionConfig;
import org.apache.hc.client5.http.config.RequestConfig;
import org.apache.hc.client5.http.impl.classic.CloseableHttpClient;
import org.apache.hc.client5.http.impl.classic.HttpClients;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManagerBuilder;
import org.apache.hc.client5.http.protocol.HttpClientContext;
import org.apache.hc.core5.http.EndpointDetails;
import org.apache.hc.core5.http.HttpRequest;
import org.apache.hc.core5.http.HttpResponse;
import org.apache.hc.core5.http.NoHttpResponseException;
import org.apache.hc.core5.http.protocol.HttpContext;
import org.apache.hc.core5.io.CloseMode;
import org.apache.hc.core5.pool.PoolConcurrencyPolicy;
import org.apache.hc.core5.util.TimeValue;
import org.apache.hc.core5.util.Timeout;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.atomic.LongAdder;

/**
 * The HTTP/1.1 client for completion requests to the instances: Apache HttpClient 5 classic (blocking), run on
 * the virtual thread that serves the client request, with one pooled keep-alive connection per request in flight.
 *
 * <p>Chosen over {@code java.net.http.HttpClient} by measurement (a throwaway main, 50 virtual-thread callers x
 * 100 streamed completions of 8 SSE chunks each against the load test's instant instance, CPU time of the
 * client's process per request after warm-up, 2 cores shared with other builds, load average 12-15):
 * <ul>
 *   <li>JDK {@code HttpClient}, virtual-thread executor: 190-240 us per request, 2,700-4,100 req/s;</li>
 *   <li>JDK {@code HttpClient}, same-thread executor: 150-210 us, 3,900-4,900 req/s;</li>
 *   <li>Apache HttpClient 5 classic on virtual threads: 82-106 us, 5,100-7,500 req/s.</li>
 * </ul>
 * The JDK client moves every response through its selector thread and executor to the waiting caller (two thread
 * hand-offs per chunk); the blocking client reads the socket on the caller's own virtual thread. In the proxy load test
 * ({@code benchmarks/.../ProxyLoadTest}, proxy in its own JVM; with the sweeper below and a shared Jackson pool) the
 * proxy's CPU per request fell from 5,030 to 1,290 us at one client (p50 overhead 2.7 to 0.6 ms) and from 1,000 to
 * 400 us at 200 clients. The health probes and model checks stay on the JDK client: they are rare GETs, and the JDK
 * client retries an idempotent GET on a stale connection by itself.
 *
 * <p>Deadlines (first byte, whole answer) are enforced by one sweeper thread that aborts the exchanges past
 * theirs every {@link #SWEEP_MILLIS} ms, since a socket timeout bounds one read, not a sum of reads. Sockets get
 * no read timeout: on a virtual thread a timed read schedules and cancels a timer task per read, and a timer
 * per deadline (a {@code ScheduledThreadPoolExecutor}) woke its thread at every schedule and cancel; in the
 * 1-client load test the two cost about 10% of the proxy's CPU (JFR thread CPU load), the sweeper a map insert
 * and removal per exchange.
 */
final class UpstreamClient implements AutoCloseable {
    /** How long an idle upstream connection is kept: under uvicorn's (vLLM's) 5 s keep-alive, so it is rarely stale. */
    static final TimeValue IDLE_KEEP = TimeValue.ofSeconds(4);

    /** Deadline precision, in ms: far below any timeout worth setting (seconds), far above the sweep's cost. */
    static final long SWEEP_MILLIS = 10;

    final CloseableHttpClient http;
    private final LongAdder staleRetries;
    private final Set<UpstreamExchange> inFlight = ConcurrentHashMap.newKeySet();
    private final Thread sweeper;
    /** Set while the sweeper parks with nothing in flight; the next {@link #track} wakes it. */
    private volatile boolean sweeperIdle;
    private volatile boolean closed;

    UpstreamClient(ProxyConfig config, LongAdder staleRetries) {
        this.staleRetries = staleRetries;
        http = HttpClients.custom()
                .setConnectionManager(PoolingHttpClientConnectionManagerBuilder.create()
                        // LAX: no global lock around leases; the number of connections follows the requests in flight.
                        .setPoolConcurrencyPolicy(PoolConcurrencyPolicy.LAX)
                        .setMaxConnPerRoute(Integer.MAX_VALUE)
                        .setMaxConnTotal(Integer.MAX_VALUE)
                        .setDefaultConnectionConfig(ConnectionConfig.custom()
                                .setConnectTimeout(Timeout.of(config.connectTimeout()))
                                .setSocketTimeout(Timeout.DISABLED)
                                .setValidateAfterInactivity(TimeValue.ofSeconds(1))
                                .build())
                        .build())
                .setDefaultRequestConfig(RequestConfig.custom()
                        .setConnectionRequestTimeout(Timeout.of(config.connectTimeout()))
                        .setResponseTimeout(Timeout.DISABLED)
                        .build())
                .setRetryStrategy(new StaleConnectionRetry())
                .evictIdleConnections(IDLE_KEEP)
                .disableRedirectHandling()
                .disableCookieManagement()
                .disableAuthCaching()
                .disableConnectionState()
                // SSE must pass through byte for byte, so no Accept-Encoding and no transparent decompression.
                .disableContentCompression()
                .build();
        sweeper = Thread.ofPlatform().name("xpyd-deadlines").daemon().start(this::sweep);
    }

    /** Watches the exchange's deadline until {@link #untrack(UpstreamExchange)}. */
    void track(UpstreamExchange exchange) {
        inFlight.add(exchange);
        if (sweeperIdle) {
            LockSupport.unpark(sweeper);
        }
    }

    void untrack(UpstreamExchange exchange) {
        inFlight.remove(exchange);
    }

    /**
     * Every {@link #SWEEP_MILLIS} ms while anything is in flight; with nothing in flight the sweeper parks until the
     * next request instead of waking 100 times a second: an idle proxy JVM (the load test's, 20 s, 2-core build
     * machine) used 1.0% of a core before, 0.65% after.
     */
    private void sweep() {
        while (!closed) {
            if (inFlight.isEmpty()) {
                sweeperIdle = true;
                // Checked again after the flag is up: a track() that added before it saw no flag and did not unpark.
                if (inFlight.isEmpty() && !closed) {
                    LockSupport.park(this);
                }
                sweeperIdle = false;
                continue;
            }
            LockSupport.parkNanos(SWEEP_MILLIS * 1_000_000L);
            long now = System.nanoTime();
            for (UpstreamExchange ex : inFlight) {
                ex.abortIfPastDeadline(now);
            }
        }
    }

    /**
     * Sends a request once more, on the same instance, only when a reused keep-alive connection failed before
     * the response started: the instance closed it while idle (vLLM drops idle connections after 5 s), so it
     * never processed the request. A fresh connection that fails, or a response that started, is not retried
     * here; the caller may try another instance.
     */
    private final class StaleConnectionRetry implements HttpRequestRetryStrategy {
        @Override
        public boolean retryRequest(HttpRequest request, IOException exception, int execCount, HttpContext context) {
            if (execCount > 1 || (request instanceof HttpUriRequestBase r && r.isCancelled())) {
                return false;
            }
            boolean connectionLevel = exception instanceof NoHttpResponseException
                    || (exception instanceof SocketException && !(exception instanceof ConnectException));
            if (!connectionLevel) {
                return false;
            }
            EndpointDetails endpoint = HttpClientContext.castOrCreate(context).getEndpointDetails();
            // A response already read on this connection means it was reused from the pool.
            boolean reused = endpoint != null && endpoint.getResponseCount() > 0;
            if (reused) {
                // HttpClient logs the retry itself (INFO, logger org.apache.hc.client5.http.impl.classic
                // .HttpRequestRetryExec).
                staleRetries.increment();
            }
            return reused;
        }

        @Override
        public boolean retryRequest(HttpResponse response, int execCount, HttpContext context) {
            return false;
        }

        @Override
        public TimeValue getRetryInterval(HttpResponse response, int execCount, HttpContext context) {
            return TimeValue.ZERO_MILLISECONDS;
        }

        @Override
        public TimeValue getRetryInterval(HttpRequest request, IOException exception, int execCount,
                                          HttpContext context) {
            return TimeValue.ZERO_MILLISECONDS;
        }
    }

    @Override
    public void close() {
        closed = true;
        LockSupport.unpark(sweeper);
        http.close(CloseMode.IMMEDIATE);
    }
}
