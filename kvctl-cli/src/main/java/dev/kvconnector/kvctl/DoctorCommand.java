package dev.kvconnector.kvctl;

import dev.kvconnector.cuda.CudaRuntime;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * Checks a store step by step (URI, open, health, a 1 MiB put/get/remove round trip) and explains each problem.
 * Exit 0 only when every step passed.
 */
@Command(name = "doctor", description = "Check that a store is reachable, configured and working.")
final class DoctorCommand implements Callable<Integer> {
    private static final long PROBE_BYTES = 1L << 20;

    @Spec
    CommandSpec spec;
    @Mixin
    StoreOption store;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        KVStore s;
        try {
            s = KVStores.open(store.uri);
        } catch (KVException e) {
            return fail(out, "open", e);
        }
        try (s) {
            ok(out, "open", s.uri() + " (capabilities " + s.capabilities() + ")");
            try {
                ok(out, "health", s.healthCheck());
            } catch (KVException e) {
                return fail(out, "health", e);
            }
            String key = "kvctl:doctor:" + ProcessHandle.current().pid() + ":" + System.nanoTime();
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment v = arena.allocate(PROBE_BYTES);
                for (long i = 0; i < PROBE_BYTES; i += 8) {
                    v.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
                }
                long t0 = System.nanoTime();
                s.put(key, v, PutOptions.DEFAULT.withTtlMillis(60_000));
                long t1 = System.nanoTime();
                MemorySegment back = arena.allocate(PROBE_BYTES);
                long r = s.getInto(key, back);
                long t2 = System.nanoTime();
                String removal = remove(s, key);
                if (r != PROBE_BYTES || v.mismatch(back) != -1) {
                    out.printf("FAIL round trip: wrote %d bytes, read back %s%n", PROBE_BYTES, GetResult.describe(r));
                    out.println("     hint: the store returned other bytes than it was given; check for a proxy or a "
                            + "shared key prefix");
                    return Kvctl.EXIT_FAILURE;
                }
                ok(out, "round trip", String.format("1 MiB put %.2f ms, get %.2f ms, remove %s", (t1 - t0) / 1e6,
                        (t2 - t1) / 1e6, removal));
            } catch (KVException e) {
                try {
                    s.remove(key);
                } catch (KVException ignored) {
                    // the probe's TTL (or the store's eviction) cleans up after a store that failed mid-check
                }
                return fail(out, "round trip", e);
            }
        }
        out.println("info cuda: " + cuda());
        out.println("healthy");
        return 0;
    }

    /** What the CUDA probe found; informational, since host tensors need no GPU. */
    private static String cuda() {
        CudaRuntime.Probe p = CudaRuntime.probe();
        if (!p.usable()) {
            return "device tensors unavailable (" + p.problem() + "); host and pinned tensors work";
        }
        StringBuilder b = new StringBuilder("driver " + p.driverVersionText() + " from " + p.library() + ", "
                + p.devices().size() + " device(s)");
        for (CudaRuntime.Device d : p.devices()) {
            b.append(String.format("; %d: %s (sm_%d%d, %d SMs, %.0f GiB, %.0f GB/s peak)", d.ordinal(), d.name(),
                    d.computeMajor(), d.computeMinor(), d.smCount(), d.totalMemoryBytes() / 1073741824.0,
                    d.peakMemoryGBps()));
        }
        return b.toString();
    }

    /** Removes the probe; a store whose protocol has no delete (lm://) is reported, not failed. */
    private static String remove(KVStore s, String key) {
        try {
            return s.remove(key) ? "ok" : "found nothing to remove";
        } catch (KVException e) {
            if (e.code() == ErrorCode.UNSUPPORTED) {
                return "not supported by this store (the probe leaves by eviction)";
            }
            throw e;
        }
    }

    private static void ok(PrintWriter out, String step, String detail) {
        out.println("ok   " + step + ": " + detail);
    }

    private static int fail(PrintWriter out, String step, KVException e) {
        out.println("FAIL " + step + ": " + e.getMessage());
        return Kvctl.EXIT_FAILURE;
    }
}
