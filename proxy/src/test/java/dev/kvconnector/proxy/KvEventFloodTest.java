package dev.kvconnector.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.events.KvEvent;
import dev.kvconnector.events.KvEventSource;
import dev.kvconnector.events.RemovalReason;
import dev.kvconnector.events.ZmqKvEventPublisher;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * A flood of events (10^5 per second, bounded here to 2 s) over real sockets does not stall request handling: the
 * feed runs on its own thread, and the event loops only read the index.
 */
class KvEventFloodTest extends ProxyTestBase {
    private static final String STORE = "valkey://store:6379";

    @Test
    void requestsKeepBeingAnsweredWhileTheIndexTakesAHundredThousandEventsASecond() throws Exception {
        var p = instance("p");
        var d = instance("d");
        try (ZmqKvEventPublisher pub = ZmqKvEventPublisher.bind("tcp://127.0.0.1:0", "tcp://127.0.0.1:0")) {
            pub.onAttach(new KvEventSource(p.address(), 1, STORE, "kvc-v1", 16, "ab".repeat(32)));
            XpydProxy proxy = start(config().policy(Policy.KV_AWARE).prefill(p.address()).decode(d.address())
                    .kvEvents(new KvEventEndpoint(p.address(), pub.publishEndpoint(), pub.replayEndpoint())));
            KvRouter router = proxy.kvRouter();
            String body = "{\"prompt\":\"flood\",\"max_tokens\":1}";
            latencies(proxy, body, 200); // warm-up: the first requests pay for class loading and the JIT
            long firstFlood = awaitLiveLink(pub, router, p.address());
            long[] quiet = latencies(proxy, body, 50);

            AtomicBoolean flooding = new AtomicBoolean(true);
            Thread flood = Thread.ofPlatform().name("flood").start(() -> {
                long start = System.nanoTime();
                long sent = 0;
                while (flooding.get()) {
                    // 100 events per 1 ms: 10^5 per second, a stored and a removed so the index stays bounded.
                    long due = start + (sent / 100 + 1) * 1_000_000L;
                    for (int k = 0; k < 50; k++, sent += 2) {
                        String h = String.format("%064x", sent % 4096);
                        long seq = firstFlood + sent;
                        pub.onEvent(new KvEvent.Stored(1, seq, p.address(), STORE, "kvc-v1", h, null, 16, 2));
                        pub.onEvent(new KvEvent.Removed(1, seq + 1, p.address(), STORE, h, RemovalReason.EVICTED));
                    }
                    LockSupport.parkNanos(Math.max(0, due - System.nanoTime()));
                }
            });
            long[] flooded;
            long eventsBefore = router.metrics.events.sum();
            try {
                long end = System.nanoTime() + 2_000_000_000L;
                flooded = latencies(proxy, body, 50);
                while (System.nanoTime() < end) {
                    Thread.sleep(20);
                }
            } finally {
                flooding.set(false);
                flood.join();
            }
            long applied = router.metrics.events.sum() - eventsBefore;
            System.out.printf("kv event flood: %d events applied; request p50/p99 quiet %.2f/%.2f ms, flooded "
                    + "%.2f/%.2f ms; %d dropped by the publisher, %d gaps, %d resyncs%n", applied,
                    quiet[25] / 1e6, quiet[49] / 1e6, flooded[25] / 1e6, flooded[49] / 1e6, pub.droppedEvents(),
                    router.metrics.gaps.sum(), router.metrics.resyncs.sum());
            assertTrue(applied > 50_000, "the flood did not reach the index: " + applied + " events applied");
            // A stall detector, not a latency goal: the publisher, the flood and the proxy share this JVM's cores, so
            // the flooded numbers above include their CPU; a feed that blocked the event loops would take seconds.
            assertTrue(flooded[49] < 5_000_000_000L, "a request took " + flooded[49] / 1e6 + " ms during the flood");
            assertTrue(router.index.size() <= 4096, "the index grew to " + router.index.size());
        }
    }

    /**
     * Publishes probe events until the router has applied one, so the flood measures a live link: a fresh jeromq
     * PUB/SUB pair sometimes never delivers until the router replaces its socket after three silent heartbeats, and a
     * SUB drops whatever was sent before it joined.
     *
     * @return the sequence number the flood goes on from
     */
    private static long awaitLiveLink(ZmqKvEventPublisher pub, KvRouter router, String instance)
            throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        long seq = 0;
        while (router.metrics.events.sum() == 0) {
            assertTrue(System.nanoTime() < deadline, "no event reached the router in 30 s, reconnects included");
            String h = String.format("%064x", 4096 + seq);
            pub.onEvent(new KvEvent.Stored(1, seq++, instance, STORE, "kvc-v1", h, null, 16, 2));
            pub.onEvent(new KvEvent.Removed(1, seq++, instance, STORE, h, RemovalReason.EVICTED));
            Thread.sleep(50);
        }
        return seq;
    }

    /** Sends {@code n} requests one after another; their latencies in ns, sorted. */
    private long[] latencies(XpydProxy proxy, String body, int n) throws Exception {
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            long t = System.nanoTime();
            assertEquals(200, post(proxy, "/v1/completions", body).statusCode());
            out[i] = System.nanoTime() - t;
        }
        Arrays.sort(out);
        return out;
    }
}
