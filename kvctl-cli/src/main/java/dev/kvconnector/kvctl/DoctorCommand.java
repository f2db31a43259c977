package dev.kvconnector.kvctl;

import dev.kvconnector.cuda.CudaRuntime;
import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.te.TransferEngineDoctor;
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
 * Checks a store step by step (URI, open, health, a 1 MiB put/get/remove round trip) and explains each problem; for
 * a transfer-engine URI ({@code mooncake-te://}) the library, the local engine, a peer and a 1 MiB round trip
 * ({@link TransferEngineDoctor}). Exit 0 only when every step passed.
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
        if (TransferEngineDoctor.handles(store.uri)) {
            return transferEngine(out);
        }
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
                MemorySegment back = arena.allocate(PROBE_BYTES);
                // The first round trip pays one-time costs (class loading, the store's first touch of its memory,
                // connection setup), so it is reported apart from a second one, which shows the store's speed.
                RoundTrip first = roundTrip(s, key + ":first", v, back);
                if (first.failed(out)) {
                    return Kvctl.EXIT_FAILURE;
                }
                RoundTrip warm = roundTrip(s, key, v, back);
                if (warm.failed(out)) {
                    return Kvctl.EXIT_FAILURE;
                }
                ok(out, "round trip", String.format("1 MiB put %.2f ms, get %.2f ms (the first one, with one-time "
                        + "setup costs: put %.2f ms, get %.2f ms), remove %s", warm.putMillis(), warm.getMillis(),
                        first.putMillis(), first.getMillis(), warm.removal()));
            } catch (KVException e) {
                for (String k : new String[] {key + ":first", key}) {
                    try {
                        s.remove(k);
                    } catch (KVException ignored) {
                        // the probe's TTL (or the store's eviction) cleans up after a store that failed mid-check
                    }
                }
                return fail(out, "round trip", e);
            }
        }
        out.println("info cuda: " + cuda());
        out.println("healthy");
        return 0;
    }

    private int transferEngine(PrintWriter out) {
        boolean healthy = true;
        for (TransferEngineDoctor.Step step : TransferEngineDoctor.check(store.uri)) {
            out.println((step.ok() ? "ok   " : "FAIL ") + step.name() + ": " + step.detail());
            healthy &= step.ok();
        }
        if (!healthy) {
            return Kvctl.EXIT_FAILURE;
        }
        out.println("healthy");
        return 0;
    }

    /** One timed put, get and remove of the probe value; {@code read} is what the get returned. */
    private record RoundTrip(long putNanos, long getNanos, long read, boolean matches, String removal) {
        double putMillis() {
            return putNanos / 1e6;
        }

        double getMillis() {
            return getNanos / 1e6;
        }

        /** Prints the failure and returns true when the store gave back other bytes than it was given. */
        boolean failed(PrintWriter out) {
            if (read == PROBE_BYTES && matches) {
                return false;
            }
            out.printf("FAIL round trip: wrote %d bytes, read back %s%n", PROBE_BYTES, GetResult.describe(read));
            out.println("     hint: the store returned other bytes than it was given; check for a proxy or a "
                    + "shared key prefix");
            return true;
        }
    }

    private static RoundTrip roundTrip(KVStore s, String key, MemorySegment v, MemorySegment back) {
        back.fill((byte) 0);
        long t0 = System.nanoTime();
        s.put(key, v, PutOptions.DEFAULT.withTtlMillis(60_000));
        long t1 = System.nanoTime();
        long r = s.getInto(key, back);
        long t2 = System.nanoTime();
        String removal = remove(s, key);
        return new RoundTrip(t1 - t0, t2 - t1, r, r == PROBE_BYTES && v.mismatch(back) == -1, removal);
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
