package dev.kvconnector.benchmarks;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.key.RequestTokens;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.memory.ChecksummedCopy;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.workload.TransferWorkload;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A whole request through the connector, beside both of its floors, in one run. One operation of {@link #insert}
 * and {@link #dropSelect} is a request of every layer (K and V, no hidden states); the report divides by the
 * model's layer count to give the per-layer time.
 *
 * <ul>
 *   <li>{@link #insert}: begin, put every layer, commit. The request is drop-selected after each invocation,
 *       untimed, so the store never holds more than one request.</li>
 *   <li>{@link #dropSelect}: read every layer of a committed request into the target and drop it. The request is
 *       inserted before each invocation, untimed.</li>
 *   <li>{@code source}: {@code contiguous} moves {@code [tokens, kvHeads, headSize]} host tensors
 *       ({@link TransferWorkload}); {@code paged} gathers from and scatters into host paged caches of 16-token
 *       blocks through shuffled block tables ({@link PagedWorkload}).</li>
 *   <li>{@link #floorSameWorkingSet}: one {@code MemorySegment.copy} of the request's bytes (every layer: 128 MiB
 *       for Llama-3-8B at 1024 tokens) between two segments as large as the request, so it streams from DRAM as the
 *       connector does. Compare per request.</li>
 *   <li>{@link #floorHotLayer}: one copy of one layer (4 MiB for Llama-3-8B at 1024 tokens), over and over, so it
 *       runs from cache as far as the layer fits. Compare per layer.</li>
 *   <li>{@link #sameWorkingSetInChunks} (not a floor, an explanation): the same-working-set copy in
 *       {@link ChecksummedCopy#CHUNK_BYTES} pieces, as a copy that checks each piece while it is in cache must go:
 *       what chunking costs by itself, before any check, against the JDK's one large copy. Compare per
 *       request.</li>
 * </ul>
 *
 * <p>Allocation: JMH's {@code -prof gc} counts every thread during the iteration, the untimed per-invocation
 * hooks included (each is a whole drop-select or insert), so its B/op about doubles the connector's. The
 * connector benchmarks therefore also count the bytes the benchmark thread allocates inside the timed call alone
 * ({@code ThreadMXBean.getCurrentThreadAllocatedBytes} around it) and print them per request and per layer at the
 * end of each trial ("timed-section allocation"). {@code memory:} and {@code shm:} run puts and reads on the
 * calling thread, so that is the connector's whole allocation there.
 *
 * <p>Every drop-select, timed or not, must return the whole request, or the trial fails: a miss is fast and would
 * pass for a good number.
 *
 * <p>Tiers (issue 21: a drop-select that hits the local tier at most 1.1x the local store alone): run it with
 * {@code -p store='tiered:[shm:/kvc-bench-{unique}?capacity=4GiB][valkey://{redis}]'} beside
 * {@code -p store='shm:/kvc-bench-{unique}?capacity=4GiB'}; the tiered store reads every layer in place from
 * {@code shm:} and also removes from redis, one pipelined batch. Written through, so that no write-back of the
 * untimed insert runs during the timed drop-select ({@code ?write=back} measures that contention too).
 * {@link TieredReadBenchmark#dropSelect} has the remote-tier comparison.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ConnectorBenchmark {
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    /** A store, its fixture and a workload, for one trial. */
    @State(Scope.Thread)
    public abstract static class Workload {
        /** Round trips before JMH's warmup starts, at most, to warm the JIT and fault in staging and store memory. */
        static final int PREWARM_REQUESTS = 20;
        /** Time bound on those round trips, ms. */
        static final long PREWARM_MS = 6000;
        /** Requests in the ring that the timed calls take in turn. */
        static final int RING = 512;

        /** Store URI template (see {@link StoreFixture}). */
        @Param({"memory:?capacity=2GiB"})
        public String store;
        /** Model preset. */
        @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
        public String model;
        /** Prompt tokens per request. */
        @Param({"256", "1024", "4096"})
        public int tokens;
        /** Where layers come from and go to: {@code contiguous} host tensors or a host {@code paged} cache. */
        @Param({"contiguous", "paged"})
        public String source;

        StoreFixture fixture;
        KVStore kv;
        TransferWorkload contiguous;
        PagedWorkload paged;
        int request;
        /** The request the next timed call moves. */
        RequestTokens next;
        private RequestTokens[] ring;
        long timedAllocatedBytes;
        long timedOps;

        /** Starts the store and checks that one request survives a round trip intact. */
        @Setup(Level.Trial)
        public void setUp() {
            fixture = StoreFixture.start(store);
            kv = KVStores.open(fixture.uri());
            KVLayout layout = KVLayout.preset(model);
            switch (source) {
                case "contiguous" -> contiguous = new TransferWorkload(kv, layout, tokens, false);
                case "paged" -> paged = new PagedWorkload(kv, layout, tokens);
                default -> throw new IllegalArgumentException("source=" + source + " is neither contiguous nor paged");
            }
            makeRing();
            insert(request(request));
            requireComplete(dropSelect(request(request++)));
            boolean intact = contiguous != null ? contiguous.targetMatchesSource() : paged.targetMatchesSource();
            if (!intact) {
                throw new IllegalStateException(fixture.uri() + " returned other bytes than were inserted");
            }
            // A request is large and few fit in a short JMH warmup; without these the first (cold) ones dominate.
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PREWARM_MS);
            for (int i = 1; i < PREWARM_REQUESTS && System.nanoTime() < deadline; i++) {
                insert(request(request));
                requireComplete(dropSelect(request(request++)));
            }
        }

        RequestTokens request(int i) {
            return contiguous != null ? contiguous.request(i) : paged.request(i);
        }

        /**
         * Requests made before the trial, taken in turn, so that the untimed setup allocates nothing either and
         * {@code -prof gc}'s figure, which counts it, shows the connector's. The store holds none of them again by the
         * time the ring comes round: each is consumed after its round trip.
         */
        private void makeRing() {
            ring = new RequestTokens[RING];
            for (int i = 0; i < RING; i++) {
                ring[i] = request(RING + i);
            }
        }

        void insert(RequestTokens r) {
            if (contiguous != null) {
                contiguous.insert(r);
            } else {
                paged.insert(r);
            }
        }

        DropResult dropSelect(RequestTokens r) {
            return contiguous != null ? contiguous.dropSelect(r) : paged.dropSelect(r);
        }

        /** Takes request number {@link #request}, untimed: the engine owns a request's token ids, not the connector. */
        void prepareNext() {
            next = ring[request % RING];
        }

        void requireComplete(DropResult r) {
            if (!r.isComplete()) {
                throw new IllegalStateException("request " + request + " came back incomplete from " + fixture.uri()
                        + ": " + r);
            }
        }

        /** Prints the timed-section allocation, then closes the workload, the store and its fixture. */
        @TearDown(Level.Trial)
        public void tearDown() {
            if (timedOps > 0) {
                long layers = KVLayout.preset(model).numLayers();
                System.out.printf(Locale.ROOT, "%ntimed-section allocation: %s %s source=%s %s tokens=%d: %d B/request,"
                                + " %d B/layer over %d requests%n", this instanceof Inserting ? "insert" : "dropSelect",
                        store, source, model,
                        tokens, timedAllocatedBytes / timedOps, timedAllocatedBytes / timedOps / layers, timedOps);
            }
            try {
                if (contiguous != null) {
                    contiguous.close();
                }
                if (paged != null) {
                    paged.close();
                }
                kv.close();
            } finally {
                fixture.close();
            }
        }
    }

    /** For {@link #insert}: takes each request before, and consumes it after, untimed. */
    public static class Inserting extends Workload {
        /** Takes the request the next invocation inserts. */
        @Setup(Level.Invocation)
        public void makeNext() {
            prepareNext();
        }

        /** Drop-selects the request just inserted, so the store starts every invocation empty. */
        @TearDown(Level.Invocation)
        public void consume() {
            requireComplete(dropSelect(next));
            request++;
        }
    }

    /** For {@link #dropSelect}: commits a request before each invocation, untimed. */
    public static class Dropping extends Workload {
        DropResult dropped;

        /** Takes and inserts the request the next invocation drop-selects. */
        @Setup(Level.Invocation)
        public void commitNext() {
            prepareNext();
            insert(next);
        }

        /** Checks that the timed drop-select got the whole request. */
        @TearDown(Level.Invocation)
        public void check() {
            requireComplete(dropped);
            request++;
        }
    }

    /** The two floors' memory: a request-sized source and destination, and one layer's. */
    @State(Scope.Thread)
    public static class Floors {
        /** Model preset. */
        @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
        public String model;
        /** Prompt tokens per request. */
        @Param({"256", "1024", "4096"})
        public int tokens;

        Arena arena;
        MemorySegment requestSource;
        MemorySegment requestTarget;
        MemorySegment layerSource;
        MemorySegment layerTarget;

        /** Allocates and fills the segments once per trial. */
        @Setup(Level.Trial)
        public void setUp() {
            KVLayout layout = KVLayout.preset(model);
            long layer = layout.layerBytes(tokens);
            arena = Arena.ofShared();
            requestSource = LayerShape.randomSegment(arena, layer * layout.numLayers());
            requestTarget = arena.allocate(requestSource.byteSize(), LayerShape.ALIGNMENT);
            requestTarget.fill((byte) 0);
            layerSource = LayerShape.randomSegment(arena, layer);
            layerTarget = arena.allocate(layer, LayerShape.ALIGNMENT);
        }

        /** Frees the segments. */
        @TearDown(Level.Trial)
        public void tearDown() {
            arena.close();
        }
    }

    /** Inserts one request (every layer, then commit). */
    @Benchmark
    public void insert(Inserting w) {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        w.insert(w.next);
        w.timedAllocatedBytes += THREADS.getCurrentThreadAllocatedBytes() - before;
        w.timedOps++;
    }

    /** Drop-selects the request that {@link Dropping#commitNext} inserted. */
    @Benchmark
    public DropResult dropSelect(Dropping w) {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        w.dropped = w.dropSelect(w.next);
        w.timedAllocatedBytes += THREADS.getCurrentThreadAllocatedBytes() - before;
        w.timedOps++;
        return w.dropped;
    }

    /** The same-working-set floor: one copy of the request's bytes, request-sized source and destination. */
    @Benchmark
    public MemorySegment floorSameWorkingSet(Floors f) {
        MemorySegment.copy(f.requestSource, 0, f.requestTarget, 0, f.requestSource.byteSize());
        return f.requestTarget;
    }

    /** The same-working-set copy in the pieces a fused check copies in. */
    @Benchmark
    public MemorySegment sameWorkingSetInChunks(Floors f) {
        long size = f.requestSource.byteSize();
        for (long off = 0; off < size; off += ChecksummedCopy.CHUNK_BYTES) {
            MemorySegment.copy(f.requestSource, off, f.requestTarget, off, Math.min(ChecksummedCopy.CHUNK_BYTES,
                    size - off));
        }
        return f.requestTarget;
    }

    /** The hot floor: one copy of one layer, the same bytes every time. */
    @Benchmark
    public MemorySegment floorHotLayer(Floors f) {
        MemorySegment.copy(f.layerSource, 0, f.layerTarget, 0, f.layerSource.byteSize());
        return f.layerTarget;
    }
}
