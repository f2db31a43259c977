package dev.kvconnector.mooncake.te;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * What the transfer engine tests run against: the test double (libmooncake_te_double.so, built by the native
 * module) by default, or the real library when {@code MOONCAKE_TE_LIB} names it (as Aeron's TestMediaDriver picks
 * the C or the Java driver). {@code MOONCAKE_TE_HOST} (default 127.0.0.1) is the engines' local server name.
 *
 * <p>When neither is available the tests abort with the reason, or fail when {@code CI=true}.
 */
public final class TeTestTarget {
    static final String DOUBLE_PROPERTY = "kvc.mooncake.te.double";

    private final boolean isDouble;
    private final String library;
    private final String host;

    private TeTestTarget(boolean isDouble, String library, String host) {
        this.isDouble = isDouble;
        this.library = library;
        this.host = host;
    }

    /** The target of this run: the real library when the environment names it, else the double. */
    public static TeTestTarget require() {
        String real = System.getenv(TransferEngineLocator.ENV_LIBRARY);
        String host = System.getenv().getOrDefault("MOONCAKE_TE_HOST", "127.0.0.1");
        if (real != null && !real.isBlank()) {
            return new TeTestTarget(false, real, host);
        }
        String dbl = System.getProperty(DOUBLE_PROPERTY);
        if (dbl == null || !Files.isRegularFile(Path.of(dbl))) {
            String why = "the transfer engine test double was not built (" + dbl + " is missing): install cmake and "
                    + "gcc and build the native module (./mvnw -pl native compile), or set MOONCAKE_TE_LIB to a real "
                    + "transfer engine library";
            if ("true".equalsIgnoreCase(System.getenv("CI"))) {
                Assertions.fail(why);
            }
            Assumptions.abort(why);
        }
        return new TeTestTarget(true, Path.of(dbl).toAbsolutePath().normalize().toString(), host);
    }

    /** Whether this is the test double. */
    public boolean isDouble() {
        return isDouble;
    }

    /** The engines' local server name. */
    public String host() {
        return host;
    }

    /** The library's path. */
    public String library() {
        return library;
    }

    /** A URI for a TCP engine over P2PHANDSHAKE. */
    public String uri() {
        return "mooncake-te://" + host + "?protocol=tcp&metadata=P2PHANDSHAKE&library=" + library;
    }

    /** Opens an engine on the target. */
    public TransferEngine open() {
        return TransferEngine.open(uri());
    }
}
