package dev.kvconnector.proxy;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Health probing ejects and readmits instances; the start-up check guards the model. */
class HealthCheckTest extends ProxyTestBase {

    private static ProxyConfig.Builder probing() {
        return config().healthInterval(Duration.ofMillis(50)).healthTimeout(Duration.ofMillis(500))
                .ejectAfterFailures(2).readmitAfterSuccesses(1);
    }

    @Test
    void failingInstanceIsEjectedAndReadmittedWhenItRecovers() throws Exception {
        var p = instance("p");
        var d1 = instance("d1");
        var d2 = instance("d2");
        XpydProxy proxy = start(probing().prefill(p.address()).decode(d1.address(), d2.address()));

        d1.health(503);
        awaitTrue(() -> !proxy.pool.list(Role.DECODE).getFirst().healthy(), "d1 ejected");
        assertTrue(get(proxy, "/status").body().contains("\"instance\":\"" + d1.address() + "\",\"healthy\":false"));
        for (int k = 0; k < 4; k++) {
            assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"x\"}").statusCode());
        }
        assertEquals(0, d1.completions().size());
        assertEquals(4, d2.completions().size());
        assertTrue(get(proxy, "/metrics").body().contains(
                "xpyd_instance_healthy{role=\"decode\",instance=\"" + d1.address() + "\"} 0"));

        d1.health(200);
        awaitTrue(() -> proxy.pool.list(Role.DECODE).getFirst().healthy(), "d1 readmitted");
        for (int k = 0; k < 4; k++) {
            assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"x\"}").statusCode());
        }
        assertEquals(2, d1.completions().size());
    }

    @Test
    void stoppedInstanceIsEjectedAndProxyHealthTurns503WhenNoDecodeIsLeft() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(probing().prefill(p.address()).decode(d.address()));
        assertEquals(200, get(proxy, "/health").statusCode());

        d.close();
        awaitTrue(() -> !proxy.pool.list(Role.DECODE).getFirst().healthy(), "d ejected");

        assertEquals(503, get(proxy, "/health").statusCode());
        var res = post(proxy, "/v1/completions", "{\"prompt\":\"x\"}");
        assertEquals(503, res.statusCode());
        assertTrue(res.body().contains("no healthy decode instance"), res.body());
    }

    @Test
    void requestThatCannotConnectEjectsTheInstanceBeforeTheNextProbe() throws Exception {
        var p = instance("p");
        var d = instance("d");
        String dead = "127.0.0.1:" + FailureHandlingTest.freePort();
        XpydProxy proxy = start(config().healthInterval(Duration.ofHours(1)).startupCheck(StartupCheck.OFF)
                .prefill(p.address()).decode(dead, d.address()));

        assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"x\"}").statusCode());

        assertTrue(!proxy.pool.list(Role.DECODE).getFirst().healthy(), "unreachable decode still takes requests");
        assertTrue(proxy.pool.list(Role.DECODE).get(1).healthy());
    }

    @Test
    void withoutProbingAnUnreachableInstanceIsSkippedButNotEjected() throws Exception {
        var p = instance("p");
        var d = instance("d");
        String dead = "127.0.0.1:" + FailureHandlingTest.freePort();
        XpydProxy proxy = start(config().startupCheck(StartupCheck.OFF).prefill(p.address()).decode(dead, d.address()));

        assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"x\"}").statusCode());

        // Nothing would ever readmit it, so it stays in rotation and each request fails over.
        assertTrue(proxy.pool.list(Role.DECODE).getFirst().healthy());
    }

    @Test
    void startRefusesAnInstanceServingAnotherModel() throws Exception {
        var p = instance("p");
        var other = new VllmInstanceTestDouble("other", "another-model");
        try {
            XpydProxy proxy = new XpydProxy(config().prefill(p.address()).decode(other.address()).build());
            KVException e = assertThrows(KVException.class, proxy::start);
            proxy.stop();
            assertEquals(ErrorCode.INVALID_CONFIG, e.code());
            assertTrue(e.getMessage().contains(other.address()), e.getMessage());
            assertTrue(e.getMessage().contains("another-model"), e.getMessage());
        } finally {
            other.close();
        }
    }

    @Test
    void startRefusesAnUnreachableInstanceUnlessToldToWarn() throws Exception {
        var d = instance("d");
        String dead = "127.0.0.1:" + FailureHandlingTest.freePort();
        XpydProxy refused = new XpydProxy(config().prefill(dead).decode(d.address()).build());
        KVException e = assertThrows(KVException.class, refused::start);
        refused.stop();
        assertTrue(e.getMessage().contains(dead), e.getMessage());

        XpydProxy warned = start(config().startupCheck(StartupCheck.WARN).prefill(dead).decode(d.address()));
        assertEquals(200, get(warned, "/status").statusCode());
    }
}
