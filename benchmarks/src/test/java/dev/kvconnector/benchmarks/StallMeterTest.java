package dev.kvconnector.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The stall meter sees a process that stood still: its JVM stopped by SIGSTOP for 400 ms. */
class StallMeterTest {
    private static final Pattern LONGEST = Pattern.compile("longest stall ([0-9.]+) ms");

    @Test
    void reportsTheTimeItsProcessWasStopped() throws Exception {
        // Up to three meters: once in a CI run at load, a stopped meter reported no stall at all (its lines showed
        // the parks that were lost, but no long one). A meter that never sees a stop fails all three.
        List<String> seen = new ArrayList<>();
        for (int attempt = 0; attempt < 3; attempt++) {
            List<String> lines = stopForAWhile();
            seen.addAll(lines);
            if (longestStall(lines) >= 300) {
                return;
            }
        }
        throw new AssertionError("a 400 ms stop shows as one stall, in none of three meters: " + seen);
    }

    /** A 3-second meter, stopped with SIGSTOP for 400 ms in the middle of its second second; its three lines. */
    private static List<String> stopForAWhile() throws Exception {
        Process meter = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                System.getProperty("java.class.path"), StallMeter.class.getName(), "3")
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(meter.getInputStream(),
                    StandardCharsets.UTF_8));
            List<String> lines = new ArrayList<>();
            lines.add(out.readLine());
            Thread.sleep(200);
            signal("STOP", meter.pid());
            Thread.sleep(400);
            signal("CONT", meter.pid());
            for (String line = out.readLine(); line != null; line = out.readLine()) {
                lines.add(line);
            }
            assertEquals(0, meter.waitFor());
            assertEquals(3, lines.size(), lines.toString());
            return lines;
        } finally {
            meter.destroyForcibly();
        }
    }

    private static double longestStall(List<String> lines) {
        double longest = 0;
        for (String line : lines) {
            Matcher m = LONGEST.matcher(line);
            assertTrue(m.find(), line);
            longest = Math.max(longest, Double.parseDouble(m.group(1)));
        }
        return longest;
    }

    private static void signal(String name, long pid) throws IOException, InterruptedException {
        assertEquals(0, new ProcessBuilder("kill", "-" + name, Long.toString(pid)).start().waitFor());
    }
}
