package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code /v1/models}, {@code /status}, {@code /health} and {@code /metrics}. */
class InfoEndpointsTest extends ProxyTestBase {

    @Test
    void modelsAndStatusDescribeTheProxy() throws Exception {
        var p = instance("p");
        var d1 = instance("d1");
        var d2 = instance("d2");
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).policy(Policy.LEAST_OUTSTANDING).prefill(p.address())
                .decode(d1.address(), d2.address()));

        JsonNode models = json(get(proxy, "/v1/models").body());
        assertEquals(MODEL, models.at("/data/0/id").asText());
        JsonNode status = json(get(proxy, "/status").body());
        assertEquals(1, status.get("prefill_node_count").asInt());
        assertEquals(2, status.get("decode_node_count").asInt());
        assertEquals(p.address(), status.at("/prefill_nodes/0").asText());
        assertEquals(d2.address(), status.at("/decode_nodes/1").asText());
        assertEquals("v1", status.get("flow").asText());
        assertEquals("least-outstanding", status.get("policy").asText());
        assertTrue(status.at("/decode_instances/0/healthy").asBoolean());
        JsonNode health = json(get(proxy, "/health").body());
        assertEquals("ok", health.get("status").asText());
        assertEquals(2, health.get("healthy_decode").asInt());
    }

    @Test
    void metricsCountRequestsErrorsAndFirstByteLatencyPerInstanceAndRole() throws Exception {
        var p = instance("p");
        var d = instance("d").failNext(1, 500);
        XpydProxy proxy = start(config().maxDecodeAttempts(1).prefill(p.address()).decode(d.address()));
        assertEquals(502, post(proxy, "/v1/completions", "{\"prompt\":\"a\"}").statusCode());
        assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"b\"}").statusCode());

        HttpResponse<String> res = get(proxy, "/metrics");

        assertEquals(200, res.statusCode());
        assertTrue(res.headers().firstValue("Content-Type").orElseThrow().startsWith("text/plain; version=0.0.4"));
        String m = res.body();
        String pl = "role=\"prefill\",instance=\"" + p.address() + "\"";
        String dl = "role=\"decode\",instance=\"" + d.address() + "\"";
        assertTrue(m.contains("xpyd_instance_requests_total{" + pl + "} 2"), m);
        assertTrue(m.contains("xpyd_instance_requests_total{" + dl + "} 2"), m);
        assertTrue(m.contains("xpyd_instance_errors_total{" + dl + "} 1"), m);
        assertTrue(m.contains("xpyd_instance_errors_total{" + pl + "} 0"), m);
        assertTrue(m.contains("xpyd_instance_first_byte_seconds_bucket{" + dl + ",le=\"+Inf\"} 2"), m);
        assertTrue(m.contains("xpyd_instance_request_seconds_count{" + pl + "} 2"), m);
        assertTrue(m.contains("# TYPE xpyd_instance_first_byte_seconds histogram"), m);
        assertTrue(m.contains("xpyd_proxy_responses_total{code=\"502\"} 1"), m);
        assertTrue(m.contains("xpyd_proxy_responses_total{code=\"200\"} 1"), m);
        assertTrue(m.contains("xpyd_instance_outstanding{" + dl + "} 0"), m);
    }
}
