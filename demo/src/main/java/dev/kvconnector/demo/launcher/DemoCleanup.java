package dev.kvconnector.demo.launcher;

import dev.kvconnector.demo.EngineCommand;
import dev.kvconnector.proxy.XpydProxy;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whatever the demo runs now, closed once: on the normal path, on failure, and from the shutdown hook on Ctrl-C.
 * Fields are volatile because the hook runs on its own thread.
 */
final class DemoCleanup {
    private final Path shmFile;
    volatile EngineFleet fleet;
    volatile XpydProxy proxy;
    volatile EngineCommand.Running reference;
    private boolean closed;

    /** @param shmFile the demo's own {@code shm:} store file, removed at the end, or null */
    DemoCleanup(Path shmFile) {
        this.shmFile = shmFile;
    }

    synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        XpydProxy p = proxy;
        if (p != null) {
            p.close();
        }
        EngineFleet f = fleet;
        if (f != null) {
            f.close();
        }
        EngineCommand.Running r = reference;
        if (r != null) {
            r.close();
        }
        if (shmFile != null) {
            try {
                Files.deleteIfExists(shmFile);
            } catch (IOException e) {
                System.err.println("kvctl demo: cannot remove the store file " + shmFile + ": " + e.getMessage());
            }
        }
    }
}
