package dev.kvconnector.proxy;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** The proxy as a user meets it: {@code curl} against a proxy in front of two instance doubles. */
class CurlEndToEndTest extends ProxyTestBase {
    private static String curl;

    @BeforeAll
    static void findCurl() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            File f = new File(dir, "curl");
            if (f.canExecute()) {
                curl = f.getPath();
                return;
            }
        }
        assumeTrue(false, "curl is not installed");
    }

    private static Process curl(String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(curl);
        cmd.addAll(List.of("-sS", "--max-time", "20"));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    private static String output(Process p) throws Exception {
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(20, TimeUnit.SECONDS));
        return out;
    }

    @Test
    void curlGetsAStreamedChatAnswerChunkByChunk() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        var p = instance("p");
        var d = instance("d").stream(3, 0).gateAfterFirstChunk(gate);
        XpydProxy proxy = start(config().flow(ProxyFlow.V1).prefill(p.address()).decode(d.address()));

        Process proc = curl("-N", "-H", "Content-Type: application/json", "-d",
                "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
                uri(proxy, "/v1/chat/completions").toString());
        try (var reader = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
            assertEquals(d.chunk(0, true).strip(), reader.readLine());
            assertEquals(0, d.completed.get(), "curl saw chunk 0 while decode was still held");
            gate.countDown();
            StringBuilder rest = new StringBuilder();
            for (String line; (line = reader.readLine()) != null; ) {
                rest.append(line).append('\n');
            }
            assertEquals("\n" + d.chunk(1, true) + d.chunk(2, true) + "data: [DONE]\n\n", rest.toString());
        } finally {
            gate.countDown();
            proc.destroy();
        }
        assertEquals(0, proc.waitFor());
        assertEquals(1, p.completions().size());
    }

    @Test
    void curlGetsAPlainCompletionAndOpenAiErrors() throws Exception {
        var p = instance("p");
        var d = instance("d");
        XpydProxy proxy = start(config().prefill(p.address()).decode(d.address()));

        String ok = output(curl("-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d",
                "{\"model\":\"test-model\",\"prompt\":\"hi\",\"max_tokens\":4}", uri(proxy, "/v1/completions").toString()));
        assertTrue(ok.endsWith("\n200"), ok);
        assertEquals("answer from d", json(ok.substring(0, ok.lastIndexOf('\n'))).at("/choices/0/text").asText());

        // curl -d without a header sends application/x-www-form-urlencoded.
        String rejected = output(curl("-w", "\n%{http_code}", "-d", "{\"prompt\":\"hi\"}",
                uri(proxy, "/v1/completions").toString()));
        assertTrue(rejected.endsWith("\n415"), rejected);
        assertEquals("invalid_request_error",
                json(rejected.substring(0, rejected.lastIndexOf('\n'))).at("/error/type").asText());

        String status = output(curl(uri(proxy, "/status").toString()));
        assertEquals(1, json(status).get("decode_node_count").asInt());
    }
}
