package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** What a benchmark prints beside its figures about the machine and its processes. */
final class Machine {
    private Machine() {
    }

    /** {@code /proc/loadavg} as it reads (1, 5 and 15 minute load averages, ...), or "unknown". */
    static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "unknown";
        }
    }

    /** The CPU time, in ns, that {@code p} has used, all its threads together. */
    static long cpuNanos(ProcessHandle p) {
        return p.info().totalCpuDuration().orElseThrow(() -> new IllegalStateException(
                "the OS reports no CPU time for process " + p.pid())).toNanos();
    }
}
