package dev.kvconnector.proxy;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import java.net.http.HttpResponse;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The proxy refuses a request whose own fields are wrong before any instance sees it, and passes the rest on. */
class RequestValidationTest extends ProxyTestBase {

    private static final String COMPLETIONS = "/v1/completions";
    private static final String CHAT = "/v1/chat/completions";
    private static final String MSG = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";

    /** Reads numbers with every digit, so a rounded or re-scaled decimal compares unequal. */
    private static final ObjectMapper EXACT = JsonMapper.builder()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES).build();

    static Stream<Arguments> badRequests() {
        return Stream.of(
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":\"x\"}", 400, "max_tokens"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":0}", 400, "max_tokens"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":2.5}", 400, "max_tokens"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":3000000000}", 400, "max_tokens"),
                Arguments.of(CHAT, "{" + MSG + ",\"max_completion_tokens\":-1}", 400, "max_completion_tokens"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"n\":\"2\"}", 400, "n"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"n\":0}", 400, "n"),
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\",\"stream\":\"true\"}", 400, "stream"),
                Arguments.of(CHAT, "{" + MSG + ",\"stream\":1}", 400, "stream"),
                Arguments.of(COMPLETIONS, "{\"model\":7,\"prompt\":\"hi\"}", 400, "model"),
                Arguments.of(COMPLETIONS, "{\"model\":\"other-model\",\"prompt\":\"hi\"}", 404, "model"),
                Arguments.of(CHAT, "{\"model\":\"other-model\"," + MSG + "}", 404, "model"),
                Arguments.of(COMPLETIONS, "{\"max_tokens\":4}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{\"prompt\":{\"text\":\"hi\"}}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[]}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[1,\"two\"]}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[1,-2]}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[[1,2],[]]}", 400, "prompt"),
                Arguments.of(COMPLETIONS, "{" + MSG + "}", 400, "prompt"),
                Arguments.of(CHAT, "{\"prompt\":\"hi\"}", 400, "messages"),
                Arguments.of(CHAT, "{\"messages\":[]}", 400, "messages"),
                Arguments.of(CHAT, "{\"messages\":\"hi\"}", 400, "messages"),
                Arguments.of(CHAT, "{\"messages\":[{\"content\":\"hi\"}]}", 400, "messages"));
    }

    @ParameterizedTest(name = "{0} {1} -> {2} on {3}")
    @MethodSource("badRequests")
    void aBadFieldIsRefusedWithTheProxysOwnErrorBeforeAnyInstanceIsCalled(String path, String body, int status,
                                                                          String param) throws Exception {
        var p = instance("p");
        var d = instance("d");
        // v0: the prefill instance would be the first to see the request, and its error would come back.
        XpydProxy proxy = start(config().flow(ProxyFlow.V0).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, path, body);

        assertEquals(status, res.statusCode(), res.body());
        assertEquals("application/json", res.headers().firstValue("Content-Type").orElseThrow());
        JsonNode err = json(res.body()).get("error");
        assertEquals(List.of("message", "type", "param", "code"), fieldNames(err));
        assertEquals("invalid_request_error", err.get("type").asText());
        assertEquals(param, err.get("param").asText());
        assertEquals(status, err.get("code").asInt());
        assertTrue(err.get("message").asText().contains("'" + param + "'"), err.get("message").asText());
        assertEquals(0, p.completions().size(), "the prefill instance saw the request");
        assertEquals(0, d.completions().size(), "the decode instance saw the request");
    }

    @ParameterizedTest
    @EnumSource(ProxyFlow.class)
    void anUnknownModelIs404NamingTheServedModelInEveryFlow(ProxyFlow flow) throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(flow).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, COMPLETIONS, "{\"model\":\"llama-9000\",\"prompt\":\"hi\"}");

        assertEquals(404, res.statusCode());
        String message = json(res.body()).at("/error/message").asText();
        assertTrue(message.contains("'llama-9000'") && message.contains("'" + MODEL + "'"), message);
        assertEquals(0, p.completions().size() + d.completions().size());
    }

    static Stream<Arguments> goodRequests() {
        return Stream.of(
                Arguments.of(COMPLETIONS, "{\"prompt\":\"hi\"}"),
                Arguments.of(COMPLETIONS, "{\"model\":null,\"prompt\":\"hi\",\"max_tokens\":null,\"n\":null,"
                        + "\"stream\":null}"),
                Arguments.of(COMPLETIONS, "{\"model\":\"" + MODEL + "\",\"prompt\":[1,2,3],\"max_tokens\":2147483647,"
                        + "\"n\":2,\"stream\":false}"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[\"a\",\"b\"]}"),
                Arguments.of(COMPLETIONS, "{\"prompt\":[[1,2],[3]]}"),
                Arguments.of(COMPLETIONS, "{\"prompt_embeds\":\"AAAA\"}"),
                Arguments.of(CHAT, "{" + MSG + ",\"max_completion_tokens\":8}"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("goodRequests")
    void everyShapeTheInstancesAcceptPasses(String path, String body) throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().flow(ProxyFlow.V0).prefill(p.address()).decode(d.address()));

        HttpResponse<String> res = post(proxy, path, body);

        assertEquals(200, res.statusCode(), res.body());
        assertEquals(1, d.completions().size());
    }

    @ParameterizedTest
    @EnumSource(ProxyFlow.class)
    void unknownFieldsReachBothInstancesUntouched(ProxyFlow flow) throws Exception {
        var p = instance("p");
        var d = instance("d").answerWhen(() -> !p.completions().isEmpty());
        XpydProxy proxy = start(config().flow(flow).prefill(p.address()).decode(d.address()));
        String unknown = "\"x_precise\":0.12345678901234567890123,\"x_scale\":1.50,\"x_huge\":123456789012345678901234567890,"
                + "\"x_exp\":-2.5e-300,\"x_text\":\"caf\\u00e9 \\\"q\\\" \\n \\ud83d\\ude00\",\"x_null\":null,"
                + "\"x_nested\":{\"a\":[1,{\"b\":false}],\"c\":{}},\"temperature\":0.7,\"logit_bias\":{\"50256\":-100}";

        HttpResponse<String> res = post(proxy, COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":4," + unknown + "}");

        assertEquals(200, res.statusCode(), res.body());
        JsonNode sent = EXACT.readTree("{" + unknown + "}");
        for (var instance : List.of(p, d)) {
            JsonNode got = EXACT.readTree(instance.completions().getFirst().rawBody());
            for (String field : fieldNames(sent)) {
                assertEquals(sent.get(field), got.get(field), field + " as " + instance.name + " received it");
            }
        }
    }

    @Test
    void aBadFieldIsCountedAsAClientResponse() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        post(proxy, COMPLETIONS, "{\"prompt\":\"hi\",\"max_tokens\":\"x\"}");

        assertTrue(get(proxy, "/metrics").body().contains("xpyd_proxy_responses_total{code=\"400\"} 1\n"));
    }

    private static List<String> fieldNames(JsonNode node) {
        List<String> names = new java.util.ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names;
    }
}
