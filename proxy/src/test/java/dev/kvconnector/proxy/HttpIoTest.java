package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Content-type matching and the error body shape. */
class HttpIoTest {

    @Test
    void jsonContentTypeMatchesWithParametersAndAnyCase() {
        assertTrue(HttpIo.isJson("application/json"));
        assertTrue(HttpIo.isJson("Application/JSON; charset=utf-8"));
        assertFalse(HttpIo.isJson(null));
        assertFalse(HttpIo.isJson("application/jsonl"));
        assertFalse(HttpIo.isJson("text/plain; note=application/json"));
        assertFalse(HttpIo.isJson("application/x-www-form-urlencoded"));
    }

    @Test
    void errorBodyHasTheOpenAiShape() throws Exception {
        var node = ProxyTestBase.JSON.readTree(HttpIo.errorBody("bad \"thing\"", "invalid_request_error", 400));
        assertEquals("bad \"thing\"", node.at("/error/message").asText());
        assertEquals("invalid_request_error", node.at("/error/type").asText());
        assertEquals(400, node.at("/error/code").asInt());
        assertTrue(node.at("/error/param").isNull(), "param is present and null when no field is at fault");
        assertEquals(1, node.size());
    }

    @Test
    void errorBodyNamesTheFieldAtFault() throws Exception {
        var node = ProxyTestBase.JSON.readTree(HttpIo.errorBody("'n' is bad", "invalid_request_error", "n", 400));
        assertEquals("n", node.at("/error/param").asText());
        assertEquals(4, node.get("error").size());
    }
}
