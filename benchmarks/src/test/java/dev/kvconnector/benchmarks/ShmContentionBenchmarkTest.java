package dev.kvconnector.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShmContentionBenchmarkTest {

    /**
     * A short run of every workload with one and two writer JVMs: each case gets a row with its ratio to the single
     * writer, the lock model's mutual-exclusion check passes for every back-off (the run throws otherwise), and
     * neither a writer process nor a file in /dev/shm is left behind.
     */
    @Test
    void runsEveryWorkloadWithOneAndTwoWritersAndLeavesNoProcessOrFile(@TempDir Path dir) throws IOException {
        Path out = dir.resolve("contention.md");
        String prefix = "kvc-contention-" + ProcessHandle.current().pid() + "-";

        ShmContentionBenchmark.main(new String[] {"--procs", "1,2", "--sizes", "4096", "--model-sizes", "65536",
            "--workloads", "store,lock-long-spin,lock-short-spin,lock-agrona", "--rounds", "1", "--warm-ms", "50",
            "--measure-ms", "100", "--out", out.toString()});

        List<String> rows = Files.readAllLines(out).stream().filter(l -> l.startsWith("| store")
                || l.startsWith("| lock-")).toList();
        assertEquals(8, rows.size(), String.join("\n", rows));
        for (String workload : List.of("store | 4 KiB", "lock-long-spin | 64 KiB", "lock-short-spin | 64 KiB",
                "lock-agrona | 64 KiB")) {
            assertTrue(rows.stream().anyMatch(r -> r.startsWith("| " + workload + " | 1 |") && r.contains("| 1.00x |")),
                    workload + " has no one-writer row:\n" + String.join("\n", rows));
            assertTrue(rows.stream().anyMatch(r -> r.startsWith("| " + workload + " | 2 |")),
                    workload + " has no two-writer row:\n" + String.join("\n", rows));
        }
        assertEquals(0, ProcessHandle.current().children().count(), "a writer JVM outlived the run");
        try (Stream<Path> left = Files.list(Path.of("/dev/shm"))) {
            assertEquals(List.of(), left.filter(p -> p.getFileName().toString().startsWith(prefix)).toList());
        }
    }
}
