package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code POST /instances/add} and {@code /instances/remove}: key, validation, and the role they edit. */
class AdminApiTest extends ProxyTestBase {
    private static final String KEY = "s3cret-admin-key";

    private HttpResponse<String> admin(XpydProxy proxy, String op, String key, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(proxy, "/instances/" + op))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null) {
            b.header("X-API-Key", key);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String add(String type, String instance) {
        return "{\"type\":\"" + type + "\",\"instance\":\"" + instance + "\"}";
    }

    @Test
    void withoutAConfiguredKeyAdminAnswers500() throws Exception {
        var d = instance("d");
        XpydProxy proxy = start(config().decode(d.address()));

        HttpResponse<String> res = admin(proxy, "add", KEY, add("decode", "127.0.0.1:1"));

        assertEquals(500, res.statusCode());
        assertTrue(json(res.body()).at("/error/message").asText().contains("ADMIN_API_KEY"));
    }

    @Test
    void missingOrWrongKeyAnswers403AndChangesNothing() throws Exception {
        var d = instance("d");
        var extra = instance("extra");
        XpydProxy proxy = start(config().adminApiKey(KEY).decode(d.address()));

        assertEquals(403, admin(proxy, "add", null, add("decode", extra.address())).statusCode());
        assertEquals(403, admin(proxy, "add", "s3cret-admin-kez", add("decode", extra.address())).statusCode());
        assertEquals(403, admin(proxy, "add", KEY + "x", add("decode", extra.address())).statusCode());
        assertEquals(403, admin(proxy, "remove", "", add("decode", d.address())).statusCode());
        assertEquals(1, proxy.pool.list(Role.DECODE).size());
    }

    @Test
    void rightKeyAddsAnInstanceThatThenTakesRequests() throws Exception {
        var p = instance("p");
        var d = instance("d");
        var extra = instance("extra");
        XpydProxy proxy = start(config().adminApiKey(KEY).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = admin(proxy, "add", KEY, add("decode", extra.address()));

        assertEquals(200, res.statusCode(), res.body());
        assertEquals(2, json(res.body()).get("decode_node_count").asInt());
        var status = json(get(proxy, "/status").body());
        assertEquals(2, status.get("decode_node_count").asInt());
        assertEquals(extra.address(), status.at("/decode_nodes/1").asText());
        for (int k = 0; k < 2; k++) {
            assertEquals(200, post(proxy, "/v1/completions", "{\"prompt\":\"x\"}").statusCode());
        }
        assertEquals(1, extra.completions().size());
    }

    @Test
    void duplicatesWrongModelsAndBadBodiesAnswer400() throws Exception {
        var d = instance("d");
        var other = new VllmInstanceTestDouble("other", "another-model");
        try {
            XpydProxy proxy = start(config().adminApiKey(KEY).decode(d.address()));

            HttpResponse<String> dup = admin(proxy, "add", KEY, add("decode", d.address()));
            assertEquals(400, dup.statusCode());
            assertTrue(dup.body().contains("already"), dup.body());
            HttpResponse<String> wrongModel = admin(proxy, "add", KEY, add("prefill", other.address()));
            assertEquals(400, wrongModel.statusCode());
            assertTrue(wrongModel.body().contains("another-model"), wrongModel.body());
            assertEquals(400, admin(proxy, "add", KEY, add("both", d.address())).statusCode());
            assertEquals(400, admin(proxy, "add", KEY, add("prefill", "no-port")).statusCode());
            assertEquals(415, admin(proxy, "add", KEY, "type=prefill").statusCode());
            assertEquals(0, proxy.pool.list(Role.PREFILL).size());
        } finally {
            other.close();
        }
    }

    @Test
    void removeEditsOnlyTheNamedRole() throws Exception {
        var both = instance("both");
        var d = instance("d");
        XpydProxy proxy = start(config().adminApiKey(KEY).prefill(both.address()).decode(both.address(), d.address()));

        HttpResponse<String> res = admin(proxy, "remove", KEY, add("prefill", both.address()));

        assertEquals(200, res.statusCode(), res.body());
        assertEquals(0, proxy.pool.list(Role.PREFILL).size());
        assertEquals(2, proxy.pool.list(Role.DECODE).size());
        assertEquals(404, admin(proxy, "remove", KEY, add("prefill", both.address())).statusCode());
    }
}
