package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The policies as the proxy applies them to real requests. */
class SchedulingThroughProxyTest extends ProxyTestBase {

    @Test
    void roundRobinSpreadsPrefillAndDecodeEvenly() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d1 = instance("d1");
        var d2 = instance("d2");
        XpydProxy proxy = start(config().prefill(p1.address(), p2.address()).decode(d1.address(), d2.address()));

        for (int k = 0; k < 4; k++) {
            assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"p" + k + "\"}").statusCode());
        }
        assertEquals(2, p1.completions().size());
        assertEquals(2, p2.completions().size());
        assertEquals(2, d1.completions().size());
        assertEquals(2, d2.completions().size());
    }

    @Test
    void prefixAffinitySendsTheSamePromptPrefixToTheSameInstances() throws Exception {
        var p1 = instance("p1");
        var p2 = instance("p2");
        var d1 = instance("d1");
        var d2 = instance("d2");
        XpydProxy proxy = start(config().policy(Policy.PREFIX_AFFINITY).prefixAffinityChars(12)
                .prefill(p1.address(), p2.address()).decode(d1.address(), d2.address()));

        for (int k = 0; k < 6; k++) {
            assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"same prefix, then " + k + "\"}")
                    .statusCode());
        }
        assertEquals(6, Math.max(p1.completions().size(), p2.completions().size()));
        assertEquals(6, Math.max(d1.completions().size(), d2.completions().size()));
    }

    @Test
    void leastOutstandingAvoidsABusyDecode() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        var p = instance("p");
        var busy = instance("busy").holdUntil(release);
        var idle = instance("idle");
        XpydProxy proxy = start(config().policy(Policy.LEAST_OUTSTANDING).prefill(p.address())
                .decode(busy.address(), idle.address()));
        try {
            Thread stuck = Thread.ofVirtual().start(() -> {
                try {
                    post(proxy, "/v1/completions", "{\"prompt\":\"slow\"}");
                } catch (Exception ignored) {
                    // The proxy stops at the end of the test.
                }
            });
            // Wait until one decode holds the first request, then send more.
            long end = System.nanoTime() + 5_000_000_000L;
            while (busy.completions().isEmpty() && idle.completions().isEmpty() && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            VllmInstanceTestDouble holder = busy.completions().isEmpty() ? idle : busy;
            for (int k = 0; k < 4; k++) {
                assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"fast\"}").statusCode());
            }
            assertEquals(busy, holder, "the first request went to the held instance");
            assertEquals(4, idle.completions().size());
            release.countDown();
            stuck.join(5_000);
        } finally {
            release.countDown();
        }
    }
}
