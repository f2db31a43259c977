package dev.kvconnector.mooncake.te;

import dev.kvconnector.testkit.ChildJvm;
import java.io.IOException;
import java.util.List;

/**
 * A peer ({@link TePeer}, or the p2p tests' producer) in its own JVM (128 MiB of heap); see {@link ChildJvm}.
 */
public final class TeChildJvm extends ChildJvm {
    private TeChildJvm(Process process) {
        super(process);
    }

    /** Starts {@code java -cp <this class path> TePeer args...}. */
    static TeChildJvm start(String... args) throws IOException {
        return start(TePeer.class, args);
    }

    /** Starts {@code java -cp <this class path> main args...}. */
    public static TeChildJvm start(Class<?> main, String... args) throws IOException {
        return new TeChildJvm(launch(main, List.of("-Xmx128m"), List.of(args)));
    }
}
