package dev.kvconnector.benchmarks;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Predicate;

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

    /** Clock ticks per second of {@code /proc}'s CPU times (Linux's USER_HZ, 100 on every common build). */
    private static final long TICKS_PER_SECOND = 100;

    /**
     * The CPU time, in ns, that the threads of process {@code pid} whose names (as {@code /proc} shows them, cut to
     * 15 characters) match {@code name} have used, from {@code /proc/PID/task/TID/stat}, at 10 ms resolution; -1 where
     * there is no {@code /proc}. Threads that ended are not counted.
     */
    static long threadCpuNanos(long pid, Predicate<String> name) {
        long ticks = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                String stat;
                try {
                    stat = Files.readString(task.resolve("stat"));
                } catch (IOException gone) {
                    continue; // the thread ended since the listing
                }
                int open = stat.indexOf('(');
                int close = stat.lastIndexOf(')');
                if (name.test(stat.substring(open + 1, close))) {
                    // After the name: state, then 10 fields, then utime and stime (fields 14 and 15 of stat).
                    String[] f = stat.substring(close + 2).split(" ");
                    ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]);
                }
            }
        } catch (IOException e) {
            return -1;
        }
        return ticks * 1_000_000_000L / TICKS_PER_SECOND;
    }
}
