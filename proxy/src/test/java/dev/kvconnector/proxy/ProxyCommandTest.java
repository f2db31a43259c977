package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code kvctl proxy} options turn into the config they name; the admin key never comes from argv. */
class ProxyCommandTest {

    private static ProxyCommand parse(Map<String, String> env, String... args) {
        ProxyCommand cmd = new ProxyCommand();
        cmd.env = env;
        new CommandLine(cmd).parseArgs(args);
        return cmd;
    }

    @Test
    void optionsBecomeTheConfig() throws Exception {
        ProxyConfig c = parse(Map.of(), "--model", "m", "--prefill", "a:1", "b:2", "--decode", "c:3,d:4",
                "--port", "9000", "--flow", "concurrent", "--policy", "prefix-affinity",
                "--on-prefill-failure", "decode-only", "--first-byte-timeout-ms", "1500", "--startup-check", "warn")
                .toConfig();

        assertEquals("m", c.model());
        assertEquals(List.of("a:1", "b:2"), c.prefill());
        assertEquals(List.of("c:3", "d:4"), c.decode());
        assertEquals(9000, c.port());
        assertEquals(ProxyFlow.CONCURRENT, c.flow());
        assertEquals(Policy.PREFIX_AFFINITY, c.policy());
        assertEquals(PrefillFailureMode.DECODE_ONLY, c.onPrefillFailure());
        assertEquals(Duration.ofMillis(1500), c.firstByteTimeout());
        assertEquals(StartupCheck.WARN, c.startupCheck());
        assertNull(c.adminApiKey());
    }

    @Test
    void kvAwareTakesEachEnginesEventEndpointsAndATokenizer() throws Exception {
        ProxyConfig c = parse(Map.of(), "--model", "m", "--prefill", "a:1", "--decode", "b:2", "--policy", "kv-aware",
                "--kv-events", "a:1=tcp://a:5557,tcp://a:5558", "--kv-events", "b:2=tcp://b:5557",
                "--kv-tokenizer", "token-ids").toConfig();
        assertEquals(Policy.KV_AWARE, c.policy());
        assertEquals(List.of(new KvEventEndpoint("a:1", "tcp://a:5557", "tcp://a:5558"),
                new KvEventEndpoint("b:2", "tcp://b:5557", null)), c.kvEvents());
        assertEquals(KvTokenizer.TOKEN_IDS, c.kvTokenizer());
        assertEquals(KvTokenizer.BYTES, parse(Map.of(), "--model", "m", "--decode", "b:2").toConfig().kvTokenizer());
        var bad = org.junit.jupiter.api.Assertions.assertThrows(CommandLine.ParameterException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "b:2", "--kv-events", "b:2"));
        assertTrue(bad.getMessage().contains("INSTANCE=PUB_ENDPOINT"), bad.getMessage());
        var twice = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "b:2", "--kv-events", "b:2=tcp://x:1",
                        "--kv-events", "b:2=tcp://y:1").toConfig());
        assertTrue(twice.getMessage().contains("two KV event endpoints"), twice.getMessage());
    }

    @Test
    void kvDecodeMaxSuffixDefaultsToFourChunksTakesZeroAndRefusesWhatIsNotACount() throws Exception {
        assertEquals(ProxyConfig.DEFAULT_KV_DECODE_MAX_SUFFIX,
                parse(Map.of(), "--model", "m", "--decode", "b:2").toConfig().kvDecodeMaxSuffix());
        assertEquals(64, ProxyConfig.DEFAULT_KV_DECODE_MAX_SUFFIX);
        assertEquals(0, parse(Map.of(), "--model", "m", "--decode", "b:2", "--kv-decode-max-suffix", "0").toConfig()
                .kvDecodeMaxSuffix());
        assertEquals(200, parse(Map.of(), "--model", "m", "--decode", "b:2", "--kv-decode-max-suffix", "200")
                .toConfig().kvDecodeMaxSuffix());
        var negative = assertThrows(IllegalArgumentException.class, () -> parse(Map.of(), "--model", "m", "--decode",
                "b:2", "--kv-decode-max-suffix", "-1").toConfig());
        assertTrue(negative.getMessage().contains("--kv-decode-max-suffix") && negative.getMessage().contains("-1"),
                negative.getMessage());
        var text = assertThrows(CommandLine.ParameterException.class, () -> parse(Map.of(), "--model", "m",
                "--decode", "b:2", "--kv-decode-max-suffix", "two chunks"));
        assertTrue(text.getMessage().contains("--kv-decode-max-suffix") && text.getMessage().contains("two chunks"),
                text.getMessage());
        var embedded = assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder("m").decode("b:2").kvDecodeMaxSuffix(Integer.MIN_VALUE).build());
        assertTrue(embedded.getMessage().contains("kvDecodeMaxSuffix"), embedded.getMessage());
    }

    @Test
    void defaultsMatchVllmsDemo() throws Exception {
        ProxyConfig c = parse(Map.of(), "--model", "m", "--prefill", "a:1", "--decode", "b:2").toConfig();
        assertEquals(8000, c.port());
        assertEquals(ProxyFlow.V0, c.flow());
        assertEquals(Policy.ROUND_ROBIN, c.policy());
        assertEquals(PrefillFailureMode.RETRY, c.onPrefillFailure());
    }

    @Test
    void adminKeyComesFromTheEnvironmentOrAFileAndIsMaskedInToString(@TempDir Path dir) throws Exception {
        ProxyConfig fromEnv = parse(Map.of("ADMIN_API_KEY", "env-key"), "--model", "m", "--decode", "b:2").toConfig();
        assertEquals("env-key", fromEnv.adminApiKey());
        assertFalse(fromEnv.toString().contains("env-key"), fromEnv.toString());

        Path file = dir.resolve("admin.key");
        Files.writeString(file, "file-key\n");
        ProxyConfig fromFile = parse(Map.of("ADMIN_API_KEY", "env-key"), "--model", "m", "--decode", "b:2",
                "--admin-key-file", file.toString()).toConfig();
        assertEquals("file-key", fromFile.adminApiKey());

        assertThrows(CommandLine.UnmatchedArgumentException.class,
                () -> parse(Map.of(), "--model", "m", "--admin-key", "argv-key", "--decode", "b:2"));
    }

    @Test
    void badValuesAreUsageErrorsNamingTheChoices() {
        var flow = assertThrows(CommandLine.ParameterException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "b:2", "--flow", "v2"));
        assertTrue(flow.getMessage().contains("'v2'") && flow.getMessage().contains("concurrent"), flow.getMessage());
        var port = assertThrows(CommandLine.ParameterException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "host:99999"));
        assertTrue(port.getMessage().contains("host:99999"), port.getMessage());
        assertThrows(CommandLine.MissingParameterException.class, () -> parse(Map.of(), "--model", "m"));
    }

    @Test
    void badValueExitsWithUsageErrorAndStartsNothing() {
        var err = new java.io.StringWriter();
        int code = new CommandLine(new ProxyCommand()).setErr(new java.io.PrintWriter(err))
                .execute("--model", "m", "--decode", "b:2", "--policy", "random");
        assertEquals(2, code);
        assertTrue(err.toString().contains("'random' is not one of [round-robin, least-outstanding,"
                + " prefix-affinity, kv-aware]"), err.toString());
    }

    @Test
    void runsAProxyThatAnswersUntilStopped() throws Exception {
        try (var d = new VllmInstanceTestDouble("d", "m")) {
            var out = new java.io.StringWriter();
            int port = FailureHandlingTest.freePort();
            ProxyCommand cmd = new ProxyCommand();
            cmd.env = Map.of();
            var cl = new CommandLine(cmd).setOut(new java.io.PrintWriter(out));
            Thread runner = Thread.ofVirtual().start(() -> cl.execute("--model", "m", "--decode", d.address(),
                    "--host", "127.0.0.1", "--port", String.valueOf(port), "--on-prefill-failure", "decode-only"));
            try {
                ProxyTestBase.awaitTrue(() -> out.toString().contains("127.0.0.1:" + port), "proxy started");
                try (var http = java.net.http.HttpClient.newHttpClient()) {
                    var res = http.send(java.net.http.HttpRequest.newBuilder(
                                    java.net.URI.create("http://127.0.0.1:" + port + "/v1/completions"))
                            .header("Content-Type", "application/json")
                            .POST(java.net.http.HttpRequest.BodyPublishers.ofString("{\"prompt\":\"x\"}")).build(),
                            java.net.http.HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, res.statusCode());
                }
            } finally {
                runner.interrupt();
                runner.join(5_000);
            }
            assertFalse(runner.isAlive(), "the command did not stop when interrupted");
            assertThrows(java.net.ConnectException.class,
                    () -> new java.net.Socket("127.0.0.1", port).close(), "the proxy still listens");
        }
    }

    @Test
    void commandIsNamedProxy() {
        assertEquals("proxy", new CommandLine(new ProxyCommand()).getCommandName());
    }
}
