package dev.kvconnector.cuda;

import dev.kvconnector.error.KVException;
import java.util.ArrayList;
import java.util.List;

/**
 * What this machine offers for device-resident KV: {@link #probe()} looks for the CUDA driver and its devices and
 * reports what it found, for {@code kvctl doctor} and for choosing a host or device path at start-up.
 */
public final class CudaRuntime {
    private CudaRuntime() {
    }

    /**
     * One visible GPU.
     *
     * @param ordinal index among the visible devices (after {@code CUDA_VISIBLE_DEVICES})
     * @param name the driver's name for it, for example {@code NVIDIA H100 80GB HBM3}
     * @param computeMajor compute capability, major
     * @param computeMinor compute capability, minor
     * @param smCount streaming multiprocessors
     * @param totalMemoryBytes device memory, in bytes
     * @param memoryClockKHz peak memory clock, in kHz
     * @param memoryBusWidthBits memory bus width, in bits
     */
    public record Device(int ordinal, String name, int computeMajor, int computeMinor, int smCount,
            long totalMemoryBytes, int memoryClockKHz, int memoryBusWidthBits) {
        /** Theoretical peak memory bandwidth in GB/s (10^9 bytes/s): two transfers per clock (DDR) over the bus. */
        public double peakMemoryGBps() {
            return 2.0 * memoryClockKHz * 1e3 * (memoryBusWidthBits / 8.0) / 1e9;
        }
    }

    /**
     * The result of {@link #probe()}.
     *
     * @param driverLoaded whether a driver library was loaded
     * @param library where it was loaded from, or empty
     * @param driverVersion the CUDA version the driver supports ({@code 1000 * major + 10 * minor}), or 0
     * @param devices the visible devices, possibly empty
     * @param problem why the device path cannot be used here (no driver, no device, ...), or empty when it can
     */
    public record Probe(boolean driverLoaded, String library, int driverVersion, List<Device> devices,
            String problem) {
        /** Copies the list. */
        public Probe {
            devices = List.copyOf(devices);
        }

        /** Whether device memory can be used: a driver and at least one device. */
        public boolean usable() {
            return problem.isEmpty();
        }

        /** The driver version as {@code major.minor}, or {@code none}. */
        public String driverVersionText() {
            return driverVersion == 0 ? "none" : driverVersion / 1000 + "." + driverVersion % 1000 / 10;
        }
    }

    /**
     * Looks for the driver and the visible devices. Never throws: each failure becomes {@link Probe#problem()} (with
     * the driver's error name and hint), and what was found before it stays in the record.
     */
    public static Probe probe() {
        CudaDriver driver;
        try {
            driver = CudaDriver.get();
        } catch (KVException | LinkageError e) {
            return new Probe(false, "", 0, List.of(), describe(e));
        }
        int version = 0;
        List<Device> devices = new ArrayList<>();
        try {
            version = driver.driverVersion();
            driver.init();
            int count = driver.deviceCount();
            for (int i = 0; i < count; i++) {
                int d = driver.device(i);
                devices.add(new Device(i, driver.deviceName(d), driver.deviceAttribute(d, CudaDriver.ATTR_CC_MAJOR),
                        driver.deviceAttribute(d, CudaDriver.ATTR_CC_MINOR),
                        driver.deviceAttribute(d, CudaDriver.ATTR_SM_COUNT), driver.deviceTotalMemory(d),
                        driver.deviceAttribute(d, CudaDriver.ATTR_MEMORY_CLOCK_KHZ),
                        driver.deviceAttribute(d, CudaDriver.ATTR_MEMORY_BUS_WIDTH_BITS)));
            }
            String problem = count == 0 ? "the driver sees no device: " + CudaResult.hint(CudaResult.NO_DEVICE) : "";
            return new Probe(true, driver.library(), version, devices, problem);
        } catch (KVException | LinkageError e) {
            return new Probe(true, driver.library(), version, devices, describe(e));
        }
    }

    private static String describe(Throwable e) {
        return e instanceof KVException ? e.getMessage() : e.toString();
    }
}
