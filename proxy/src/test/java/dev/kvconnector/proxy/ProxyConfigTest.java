package dev.kvconnector.proxy;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Config validation names the bad value; addresses parse strictly. */
class ProxyConfigTest {

    @Test
    void configNeedsAModelAndADecodeInstance() {
        assertThrows(IllegalArgumentException.class, () -> ProxyConfig.builder(" ").decode("a:1").build());
        var e = assertThrows(IllegalArgumentException.class, () -> ProxyConfig.builder("m").prefill("a:1").build());
        assertTrue(e.getMessage().contains("decode"), e.getMessage());
    }

    @Test
    void nonPositiveLimitsAreRejectedByName() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder("m").decode("a:1").firstByteTimeout(Duration.ZERO).build());
        assertTrue(e.getMessage().contains("firstByteTimeout"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder("m").decode("a:1").maxDecodeAttempts(0).build());
        assertTrue(e.getMessage().contains("maxDecodeAttempts"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder("m").decode("a:1").maxRequestBytes(-1).build());
        assertTrue(e.getMessage().contains("maxRequestBytes"), e.getMessage());
    }

    @Test
    void hostPortAcceptsNamesIpv6AndSchemeButNotGarbage() {
        assertEquals(new HostPort("gpu-3", 8100), HostPort.parse("gpu-3:8100"));
        assertEquals(new HostPort("[::1]", 8100), HostPort.parse("[::1]:8100"));
        assertEquals(new HostPort("10.0.0.5", 80), HostPort.parse("http://10.0.0.5:80/"));
        for (String bad : new String[] {"", "host", "host:", ":80", "host:0", "host:65536", "host:x", "::1:80"}) {
            assertThrows(IllegalArgumentException.class, () -> HostPort.parse(bad), bad);
        }
    }
}
