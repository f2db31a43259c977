package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kvconnector.demo.EngineCommand;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The command line of a child engine JVM. */
class EngineFleetTest {

    @Test
    void everyChildEngineExitsOnOutOfMemoryError() {
        List<String> cmd = EngineFleet.command("kv_consumer", "shm:/x", "kvc-v1", true, true);
        int main = cmd.indexOf(EngineCommand.class.getName());
        int flag = cmd.indexOf("-XX:+ExitOnOutOfMemoryError");
        assertTrue(flag > 0 && flag < main, "a JVM option, before the main class: " + cmd);
        assertEquals(List.of("--role", "kv_consumer"), cmd.subList(cmd.indexOf("--role"), cmd.indexOf("--role") + 2));
        assertTrue(cmd.containsAll(List.of("--tiny", "--layer-wise")), cmd.toString());
    }

    @Test
    void theChildJvmAcceptsItsOptionsAndTurnsTheFlagOn() throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(EngineFleet.javaExecutable());
        cmd.addAll(EngineFleet.jvmOptions());
        cmd.addAll(List.of("-XX:+PrintFlagsFinal", "-version"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.lines().anyMatch(l -> l.contains(" ExitOnOutOfMemoryError ") && l.contains("= true")),
                "ExitOnOutOfMemoryError is not on in the child JVM");
    }
}
