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
    void badValuesAreNamed() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "b:2", "--flow", "v2").toConfig());
        assertTrue(e.getMessage().contains("--flow 'v2'") && e.getMessage().contains("concurrent"), e.getMessage());
        var port = assertThrows(IllegalArgumentException.class,
                () -> parse(Map.of(), "--model", "m", "--decode", "host:99999").toConfig());
        assertTrue(port.getMessage().contains("host:99999"), port.getMessage());
        assertThrows(CommandLine.MissingParameterException.class, () -> parse(Map.of(), "--model", "m"));
    }

    @Test
    void commandIsNamedProxy() {
        assertEquals("proxy", new CommandLine(new ProxyCommand()).getCommandName());
    }
}
