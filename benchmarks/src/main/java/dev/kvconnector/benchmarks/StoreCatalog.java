package dev.kvconnector.benchmarks;

import dev.kvconnector.store.KVStores;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Lists the store URI templates this class path and machine can benchmark, comma-separated, for JMH's
 * {@code -p store=...}: {@code memory:} always; {@code shm:} and {@code valkey://} (against a fresh
 * {@code redis-server}) once their providers are on the class path; and every URI in {@code $KVC_BENCH_STORES}
 * (comma-separated), for stores whose server the user runs, such as {@code lm://host:port} or
 * {@code mooncake://master:50051}. {@code benchmarks/run.sh} calls it so that one run covers every backend present.
 */
public final class StoreCatalog {
    /** Template for the in-process store; 2 GiB holds one request of the largest preset at 4096 tokens. */
    static final String MEMORY = "memory:?capacity=2GiB";
    /** Template for the shared-memory store. */
    static final String SHM = "shm:/kvc-bench-{unique}?capacity=2GiB";
    /** Template for our Valkey client against a fresh local server. */
    static final String VALKEY = "valkey://{redis}";
    /** Template for the {@code lm://} store against the Java LMCache server, in-process. */
    static final String LM = "lm://{lmserver}";

    private StoreCatalog() {
    }

    /**
     * Prints the list. With {@code --removable}, only the stores that can remove an entry: the connector benchmark's
     * workload consumes every request it reads, and the LMCache server protocol ({@code lm://}) has no delete.
     */
    public static void main(String[] args) {
        List<String> out = new ArrayList<>(stores(KVStores.providers().keySet(),
                RedisServerFixture.findServer() != null, System.getenv("KVC_BENCH_STORES")));
        Path dbl = mooncakeDoublePath();
        if (KVStores.providers().containsKey("mooncake") && Files.exists(dbl)) {
            out.add(mooncakeDouble(dbl.toString()));
        }
        boolean removable = args.length > 0 && args[0].equals("--removable");
        System.out.println(String.join(",", removable ? removable(out) : out));
    }

    /** The stores of {@code all} that can remove entries: every one but {@code lm://}. */
    static List<String> removable(List<String> all) {
        return all.stream().filter(u -> !u.startsWith("lm:")).toList();
    }

    /** Where the build leaves the Mooncake store test double, relative to the repository root. */
    static final String MOONCAKE_DOUBLE = "native/target/lib/libmooncake_store_double.so";

    /** The Mooncake store test double's absolute path, from the repository root this runs in. */
    static Path mooncakeDoublePath() {
        return Path.of(MOONCAKE_DOUBLE).toAbsolutePath();
    }

    /**
     * The {@code mooncake://} URI of the native test double at {@code library}: the binding and the store's zero-copy
     * path are real, the store behind them is the in-process double (named so in the report by its library). The
     * defaults otherwise, as a user gets them, but for the probe of the master ({@code probe-timeout=0}): the double
     * has none.
     */
    static String mooncakeDouble(String library) {
        return "mooncake://127.0.0.1:50779?metadata=P2PHANDSHAKE&local_hostname=127.0.0.1&segment=1GiB&buffer=64MiB"
                + "&probe-timeout=0&library=" + library;
    }

    /** The templates for these provider schemes, server availability and extra URIs. */
    static List<String> stores(Set<String> schemes, boolean redisServer, String extra) {
        List<String> out = new ArrayList<>();
        out.add(MEMORY);
        if (schemes.contains("shm")) {
            out.add(SHM);
        }
        if (schemes.contains("valkey") && redisServer) {
            out.add(VALKEY);
        }
        if (schemes.contains("lm")) {
            out.add(LM);
        }
        if (extra != null) {
            for (String u : extra.split(",")) {
                if (!u.isBlank() && !out.contains(u.strip())) {
                    out.add(u.strip());
                }
            }
        }
        return out;
    }
}
