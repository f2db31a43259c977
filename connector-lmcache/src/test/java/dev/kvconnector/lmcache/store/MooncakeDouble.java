package dev.kvconnector.lmcache.store;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * The native Mooncake store test double (libmooncake_store_double.so, built by the native module), as
 * connector-mooncake's tests use it: the real libmooncake_store.so needs a Mooncake master, which does not run on
 * the build machine. Each fake master address is its own pool, so tests do not see each other's objects.
 */
public final class MooncakeDouble {
    private static final AtomicInteger NEXT_MASTER_PORT = new AtomicInteger(41000);

    private MooncakeDouble() {
    }

    /** The double's path, or an aborted (locally) or failed ({@code CI=true}) test when it was not built. */
    public static String library() {
        String lib = System.getProperty("kvc.mooncake.double");
        if (lib == null || !Files.isRegularFile(Path.of(lib))) {
            String why = "the Mooncake store test double was not built (" + lib + " is missing): install cmake and "
                    + "gcc and build the native module";
            if ("true".equalsIgnoreCase(System.getenv("CI"))) {
                Assertions.fail(why);
            }
            Assumptions.abort(why);
        }
        return Path.of(lib).toAbsolutePath().normalize().toString();
    }

    /** A fresh fake master address (a fresh pool of the double). */
    public static String freshMaster() {
        return "127.0.0.1:" + NEXT_MASTER_PORT.getAndIncrement();
    }

    /** A URI of {@code scheme} on {@code master} with small staging, and no probe of the master (there is none). */
    public static String uri(String scheme, String master) {
        return scheme + "://" + master + "?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1&library=" + library()
                + "&segment=64MiB&buffer=16MiB&staging=4MiB&staging-slots=4&probe-timeout=0";
    }
}
