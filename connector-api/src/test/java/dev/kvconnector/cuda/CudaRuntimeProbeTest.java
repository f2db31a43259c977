package dev.kvconnector.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class CudaRuntimeProbeTest {

    @Test
    void probeNeverThrowsAndExplainsWhatItFound() {
        CudaRuntime.Probe probe = CudaRuntime.probe();
        if (!probe.driverLoaded()) {
            assertFalse(probe.usable());
            assertEquals("none", probe.driverVersionText());
            assertTrue(probe.devices().isEmpty());
            assertTrue(probe.problem().contains("libcuda"), probe.problem());
        } else if (probe.devices().isEmpty()) {
            assertFalse(probe.usable());
            assertFalse(probe.problem().isEmpty());
        } else {
            assertTrue(probe.usable(), probe.problem());
            assertTrue(probe.driverVersion() >= 11000, probe.driverVersionText());
            for (CudaRuntime.Device d : probe.devices()) {
                assertFalse(d.name().isBlank());
                assertTrue(d.computeMajor() >= 3 && d.smCount() > 0 && d.totalMemoryBytes() > 0, d.toString());
            }
        }
    }

    @Test
    void withoutADriverEveryUseFailsAsUnsupportedMemoryNamingWhatWasSearched() {
        Assumptions.assumeFalse(CudaRuntime.probe().driverLoaded(), "this machine has a CUDA driver");
        KVException first = assertThrows(KVException.class, CudaDriver::get);
        assertEquals(ErrorCode.UNSUPPORTED_MEMORY, first.code());
        assertTrue(first.getMessage().contains("libcuda.so.1"), first.getMessage());
        assertTrue(first.hint().contains(CudaDriver.LIBRARY_PROP), first.hint());
        KVException second = assertThrows(KVException.class, () -> CudaContext.primary(0));
        assertEquals(first.getMessage(), second.getMessage());
    }

    @Test
    void peakBandwidthIsDoubleDataRateOverTheBus() {
        CudaRuntime.Device h100 = new CudaRuntime.Device(0, "NVIDIA H100", 9, 0, 132, 80L << 30, 2_619_000, 5120);
        assertEquals(3352.3, h100.peakMemoryGBps(), 0.1);
    }

    @Test
    void driverVersionPrintsAsMajorDotMinor() {
        assertEquals("12.4", new CudaRuntime.Probe(true, "libcuda.so.1", 12040, List.of(), "").driverVersionText());
    }
}
