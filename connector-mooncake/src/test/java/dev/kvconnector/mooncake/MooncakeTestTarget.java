package dev.kvconnector.mooncake;

import dev.kvconnector.store.StoreUri;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * What the Mooncake tests run against: the native test double (libmooncake_store_double.so, built by the native
 * module) by default, or a real libmooncake_store.so and master when the environment names them:
 * {@code MOONCAKE_STORE_LIB} and {@code MOONCAKE_MASTER} ({@code host:port}), optionally {@code MOONCAKE_METADATA}
 * (default {@code P2PHANDSHAKE}) and {@code MOONCAKE_LOCAL_HOSTNAME} (default {@code 127.0.0.1}).
 *
 * <p>When neither is available the tests abort with the reason, or fail when {@code CI=true}: CI must build the
 * double.
 */
final class MooncakeTestTarget {
    static final String DOUBLE_PROPERTY = "kvc.mooncake.double";
    private static final AtomicInteger NEXT_FAKE_MASTER_PORT = new AtomicInteger(40000);

    private final boolean isDouble;
    private final String library;
    private final String master;
    private final String metadata;
    private final String localHostname;

    private MooncakeTestTarget(boolean isDouble, String library, String master, String metadata,
                               String localHostname) {
        this.isDouble = isDouble;
        this.library = library;
        this.master = master;
        this.metadata = metadata;
        this.localHostname = localHostname;
    }

    /** The target, or an aborted (locally) / failed (CI) test when there is none. */
    static MooncakeTestTarget require() {
        Map<String, String> env = System.getenv();
        String realLib = env.get("MOONCAKE_STORE_LIB");
        String realMaster = env.get("MOONCAKE_MASTER");
        if (realLib != null && !realLib.isBlank() && realMaster != null && !realMaster.isBlank()) {
            String md = env.getOrDefault("MOONCAKE_METADATA", "P2PHANDSHAKE");
            return new MooncakeTestTarget(false, realLib, realMaster, md,
                    env.getOrDefault("MOONCAKE_LOCAL_HOSTNAME", "127.0.0.1"));
        }
        String dbl = System.getProperty(DOUBLE_PROPERTY);
        if (dbl == null || !Files.isRegularFile(Path.of(dbl))) {
            String why = "the Mooncake store test double was not built (" + dbl + " is missing): install cmake and gcc "
                    + "and build the native module (./mvnw -pl native compile), or set MOONCAKE_STORE_LIB and "
                    + "MOONCAKE_MASTER to test against a real store";
            if ("true".equalsIgnoreCase(System.getenv("CI"))) {
                Assertions.fail(why);
            }
            Assumptions.abort(why);
        }
        return new MooncakeTestTarget(true, Path.of(dbl).toAbsolutePath().normalize().toString(), null,
                "P2PHANDSHAKE", "127.0.0.1");
    }

    /** Whether this is the test double (whose pool size, leases and strictness tests may rely on). */
    boolean isDouble() {
        return isDouble;
    }

    String library() {
        return library;
    }

    /**
     * A master address for a new pool: with the double, a fresh fake address (pools are per master address), so
     * tests do not see each other's objects; with a real store, the real master.
     */
    String freshMaster() {
        return isDouble ? "127.0.0.1:" + NEXT_FAKE_MASTER_PORT.getAndIncrement() : master;
    }

    String metadata() {
        return metadata;
    }

    String localHostname() {
        return localHostname;
    }

    /** A URI for a store on {@code master} with small staging; {@code extra} options ({@code &a=b}) override. */
    String uri(String master, String extra) {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("metadata", metadata);
        options.put("local_hostname", localHostname);
        options.put("library", library);
        options.put("segment", "64MiB");
        options.put("buffer", "16MiB");
        options.put("staging", "4MiB");
        options.put("staging-slots", "4");
        if (isDouble) {
            options.put("probe-timeout", "0"); // the double has no master to probe
        }
        for (String pair : extra.split("&")) {
            int eq = pair.indexOf('=');
            if (eq > 0) {
                options.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
        }
        StringBuilder sb = new StringBuilder("mooncake://").append(master);
        char sep = '?';
        for (Map.Entry<String, String> e : options.entrySet()) {
            sb.append(sep).append(e.getKey()).append('=').append(e.getValue());
            sep = '&';
        }
        return sb.toString();
    }

    /** Opens a store on a fresh pool. */
    MooncakeStore open(String extra) {
        return open(freshMaster(), extra);
    }

    MooncakeStore open(String master, String extra) {
        return MooncakeStore.open(StoreUri.parse(uri(master, extra)), Map.of());
    }

    /** A key prefix unique to one test, so runs against a shared real store do not collide. */
    static String uniquePrefix() {
        return "kvc-test-" + UUID.randomUUID() + "-";
    }
}
