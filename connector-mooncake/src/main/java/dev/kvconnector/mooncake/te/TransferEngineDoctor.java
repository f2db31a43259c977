package dev.kvconnector.mooncake.te;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import dev.kvconnector.mooncake.MooncakeLibraryLocation;
import dev.kvconnector.store.StoreUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * {@code kvctl doctor} for a transfer-engine URI: checks, in order, that the library loads, that the local engine
 * starts, that a peer can be reached, and a 1 MiB round trip (WRITE into a second local engine's registered memory,
 * READ it back, every byte compared). The peer is the URI's {@code peer=host:port} (another engine's segment name),
 * else the second local engine. The round trip always runs against the second local engine: a remote engine's
 * memory is written only by a protocol that it takes part in. The checks stop at the first failure.
 */
public final class TransferEngineDoctor {
    /** The URI option naming a peer's segment to reach, which the engine itself does not take. */
    public static final String PEER_OPTION = "peer";
    /** Bytes of the round trip. */
    static final long PROBE_BYTES = 1L << 20;
    private static final long WAIT_SECONDS = 30;

    /**
     * One check.
     *
     * @param name the check ({@code library}, {@code engine}, {@code peer}, {@code round trip})
     * @param ok whether it passed
     * @param detail what it found, or the error's message (with its hint)
     */
    public record Step(String name, boolean ok, String detail) {
    }

    private TransferEngineDoctor() {
    }

    /** Whether {@code uri} is a transfer-engine URI, for a doctor that also checks stores. */
    public static boolean handles(String uri) {
        return uri.startsWith(TransferEngine.SCHEME + ":");
    }

    /** Runs the checks with the process environment. */
    public static List<Step> check(String uri) {
        return check(uri, System.getenv());
    }

    /** Runs the checks; the list ends at the first failed step. */
    public static List<Step> check(String uri, Map<String, String> env) {
        List<Step> steps = new ArrayList<>();
        StoreUri parsed;
        String engineUri;
        try {
            parsed = StoreUri.parse(uri);
            engineUri = withoutPeer(uri);
            MooncakeLibraryLocation where = TransferEngineLocator.locate(parsed.param("library"), env,
                    System.getProperty("java.library.path"), parsed.masked());
            TransferEngineLibrary.load(where);
            steps.add(new Step("library", true, where.toString()));
        } catch (KVException e) {
            steps.add(failed("library", e));
            return steps;
        }
        try (TransferEngine local = TransferEngine.open(StoreUri.parse(engineUri), env)) {
            steps.add(new Step("engine", true, "segment " + local.segmentName() + " on " + local.uri()));
            try (TransferEngine loopback = TransferEngine.open(StoreUri.parse(engineUri), env)) {
                String peer = parsed.param(PEER_OPTION);
                try {
                    long start = System.nanoTime();
                    RemoteSegment reached = local.openSegment(peer != null ? peer : loopback.segmentName());
                    steps.add(new Step("peer", true, "reached " + reached.name() + " in " + millis(start) + " ms"
                            + (peer != null ? "" : " (a second local engine; give peer=host:port for another)")));
                    if (peer != null) {
                        local.closeSegment(reached);
                    }
                } catch (KVException e) {
                    steps.add(failed("peer", e));
                    return steps;
                }
                steps.add(roundTrip(local, loopback));
            }
        } catch (KVException e) {
            steps.add(failed(steps.size() == 1 ? "engine" : steps.size() == 2 ? "peer" : "round trip", e));
        }
        return steps;
    }

    private static Step roundTrip(TransferEngine local, TransferEngine loopback) {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment out = arena.allocate(PROBE_BYTES, 4096);
            MemorySegment back = arena.allocate(PROBE_BYTES, 4096);
            MemorySegment remote = arena.allocate(PROBE_BYTES, 4096);
            for (long i = 0; i < PROBE_BYTES; i += 8) {
                out.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            local.register(out, "cpu:0");
            local.register(back, "cpu:0");
            loopback.register(remote, "cpu:0");
            try (TransferBatch batch = local.newBatch(1)) {
                RemoteSegment peer = local.openSegment(loopback.segmentName());
                // The first pair pays one-time costs (connection, first touch of the memory), so a second one
                // shows the engine's speed.
                long[] first = writeThenRead(batch, out, back, peer, remote);
                Step wrong = mismatch(out, back, loopback);
                if (wrong != null) {
                    return wrong;
                }
                back.fill((byte) 0);
                long[] warm = writeThenRead(batch, out, back, peer, remote);
                wrong = mismatch(out, back, loopback);
                return wrong != null ? wrong : new Step("round trip", true, String.format("1 MiB WRITE %.2f ms, "
                        + "READ %.2f ms (the first, with one-time setup costs: WRITE %.2f ms, READ %.2f ms), every "
                        + "byte the same", warm[0] / 1e6, warm[1] / 1e6, first[0] / 1e6, first[1] / 1e6));
            } finally {
                loopback.unregister(remote);
                local.unregister(back);
                local.unregister(out);
            }
        } catch (KVException e) {
            return failed("round trip", e);
        }
    }

    private static Step mismatch(MemorySegment out, MemorySegment back, TransferEngine loopback) {
        long at = out.mismatch(back);
        return at < 0 ? null : new Step("round trip", false, "wrote 1 MiB to " + loopback.segmentName()
                + " and read back other bytes from offset " + at + ": the engine moved the wrong bytes");
    }

    /** A timed WRITE of {@code out} into the peer, then a READ of it into {@code back}: {write ns, read ns}. */
    private static long[] writeThenRead(TransferBatch batch, MemorySegment out, MemorySegment back, RemoteSegment peer,
                                        MemorySegment remote) {
        long t0 = System.nanoTime();
        batch.write(out, peer, remote.address(), PROBE_BYTES);
        end(batch);
        long t1 = System.nanoTime();
        batch.reset();
        batch.read(back, peer, remote.address(), PROBE_BYTES);
        end(batch);
        long t2 = System.nanoTime();
        batch.reset();
        return new long[] {t1 - t0, t2 - t1};
    }

    private static void end(TransferBatch batch) {
        int rc = batch.submit();
        if (rc != 0) {
            throw batch.submitFailure(rc);
        }
        rc = batch.await(WAIT_SECONDS, TimeUnit.SECONDS);
        if (rc != TransferBatch.COMPLETED) {
            KVException why = batch.failure();
            throw why != null ? why : KVException.of(ErrorCode.TIMEOUT, "the 1 MiB transfer did not end within "
                    + WAIT_SECONDS + " s").operation("doctor").build();
        }
    }

    private static String withoutPeer(String uri) {
        int q = uri.indexOf('?');
        if (q < 0) {
            return uri;
        }
        String query = Arrays.stream(uri.substring(q + 1).split("&"))
                .filter(p -> !p.startsWith(PEER_OPTION + "=")).collect(Collectors.joining("&"));
        return query.isEmpty() ? uri.substring(0, q) : uri.substring(0, q + 1) + query;
    }

    private static long millis(long start) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    private static Step failed(String name, KVException e) {
        return new Step(name, false, e.getMessage());
    }
}
