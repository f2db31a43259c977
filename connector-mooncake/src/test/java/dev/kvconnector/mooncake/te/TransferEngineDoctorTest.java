package dev.kvconnector.mooncake.te;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code kvctl doctor} for a transfer-engine URI, over the double (or the library MOONCAKE_TE_LIB names). */
class TransferEngineDoctorTest {
    @Test
    void aWorkingEnginePassesEveryCheckWithAByteExactRoundTrip() {
        List<TransferEngineDoctor.Step> steps = TransferEngineDoctor.check(TeTestTarget.require().uri());
        assertEquals(List.of("library", "engine", "peer", "round trip"),
                steps.stream().map(TransferEngineDoctor.Step::name).toList(), steps::toString);
        assertTrue(steps.stream().allMatch(TransferEngineDoctor.Step::ok), steps::toString);
        assertTrue(steps.getLast().detail().contains("every byte the same"), steps.getLast().detail());
    }

    @Test
    void aMissingLibraryStopsAtTheFirstCheckNamingThePath() {
        List<TransferEngineDoctor.Step> steps = TransferEngineDoctor.check(
                "mooncake-te://127.0.0.1?library=/nonexistent/libtransfer_engine.so", Map.of());
        assertEquals(1, steps.size(), steps::toString);
        assertFalse(steps.getFirst().ok());
        assertTrue(steps.getFirst().detail().contains("/nonexistent/libtransfer_engine.so"),
                steps.getFirst().detail());
    }

    @Test
    void anUnreachablePeerFailsThePeerCheckNamingItsHostAndPort() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<TransferEngineDoctor.Step> steps = TransferEngineDoctor.check(TeTestTarget.require().uri()
                + "&peer=127.0.0.1:" + port);
        assertEquals("peer", steps.getLast().name(), steps::toString);
        assertFalse(steps.getLast().ok());
        assertTrue(steps.getLast().detail().contains("127.0.0.1:" + port), steps.getLast().detail());
    }
}
