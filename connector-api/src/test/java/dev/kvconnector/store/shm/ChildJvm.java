package dev.kvconnector.store.shm;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** A {@link ShmChild} in its own JVM (64 MiB of heap); see {@link dev.kvconnector.testkit.ChildJvm}. */
final class ChildJvm extends dev.kvconnector.testkit.ChildJvm {
    private ChildJvm(Process process) {
        super(process);
    }

    /** Starts {@code java -cp <this class path> ShmChild args...} with the given system properties. */
    static ChildJvm start(Map<String, String> props, String... args) throws IOException {
        List<String> options = new ArrayList<>(List.of("-Xmx64m"));
        props.forEach((k, v) -> options.add("-D" + k + "=" + v));
        return new ChildJvm(launch(ShmChild.class, options, List.of(args)));
    }
}
