package dev.kvconnector.lmcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.lmcache.protocol.LmProtocolVersion;
import dev.kvconnector.lmcache.server.LmCacheServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class LmServerCommandTest {
    @Test
    void optionsConfigureTheServer() {
        LmServerCommand cmd = new LmServerCommand();
        new CommandLine(cmd).parseArgs("--port", "0", "--protocol", "v0", "--capacity", "4MiB", "--host",
                "127.0.0.1", "--payload-timeout", "250ms");
        LmCacheServer server = cmd.startServer();
        try {
            assertEquals(LmProtocolVersion.V0, server.protocol());
            assertEquals(4L << 20, server.capacityBytes());
            assertEquals(250, server.payloadTimeoutMillis());
            assertTrue(server.boundPort() > 0);
        } finally {
            server.stop();
        }
    }

    @Test
    void anUnknownProtocolExitsWithCode2AndSaysWhy() {
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new LmServerCommand()).setErr(new PrintWriter(err));
        assertEquals(2, cl.execute("--port", "0", "--protocol", "v7"));
        assertTrue(err.toString().contains("v7"), err.toString());
    }

    @Test
    void aBadCapacityExitsWithCode2() {
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new LmServerCommand()).setErr(new PrintWriter(err));
        assertEquals(2, cl.execute("--port", "0", "--capacity", "lots"));
        assertTrue(err.toString().contains("--capacity=lots"), err.toString());
    }

    @Test
    void aBadPayloadTimeoutExitsWithCode2() {
        for (String bad : new String[] {"soon", "0"}) {
            StringWriter err = new StringWriter();
            CommandLine cl = new CommandLine(new LmServerCommand()).setErr(new PrintWriter(err));
            assertEquals(2, cl.execute("--port", "0", "--payload-timeout", bad));
            assertTrue(err.toString().contains("timeout"), err.toString());
        }
    }
}
