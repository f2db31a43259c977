package dev.kvconnector.demo.launcher;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fails a test after which a child process of this JVM is still alive: every engine a demo starts must be stopped by
 * it, on success and on failure. Processes whose command line names none of {@code kvconnector}'s mains (a
 * redis-server a test starts and stops itself) are not counted.
 */
final class NoEngineLeftRunning implements AfterEachCallback {
    @Override
    public void afterEach(ExtensionContext context) {
        List<ProcessHandle> alive = ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(h -> h.info().commandLine().orElse("").contains("dev.kvconnector")).toList();
        assertTrue(alive.isEmpty(), "child processes left running: " + alive.stream()
                .map(h -> h.pid() + " " + h.info().commandLine().orElse("?")).toList());
    }
}
