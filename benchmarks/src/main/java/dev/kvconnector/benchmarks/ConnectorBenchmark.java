package dev.kvconnector.benchmarks;

import dev.kvconnector.connector.DropResult;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.workload.TransferWorkload;
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
 * A whole request through the connector, with {@link TransferWorkload}: the code {@code kvctl bench} runs. One
 * operation is a request of every layer (K and V, no hidden states); the report divides by the model's layer count
 * to give the per-layer time, which sits beside the per-layer floors.
 *
 * <ul>
 *   <li>{@link #insert}: begin, put every layer, commit. The request is drop-selected after each invocation,
 *       untimed, so the store never holds more than one request.</li>
 *   <li>{@link #dropSelect}: read every layer of a committed request into the target tensors and drop it. The
 *       request is inserted before each invocation, untimed.</li>
 * </ul>
 * Every drop-select, timed or not, must return the whole request, or the trial fails: a miss is fast and would
 * pass for a good number. A request takes from about 100 us (qwen2.5-0.5b, 256 tokens) to seconds, long enough
 * that JMH's per-invocation fixtures do not distort the sample.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ConnectorBenchmark {

    /** A store, its fixture and a workload, for one trial. */
    @State(Scope.Thread)
    public abstract static class Workload {
        /** Round trips before JMH's warmup starts, at most, to warm the JIT and fault in staging and store memory. */
        static final int PREWARM_REQUESTS = 20;
        /** Time bound on those round trips, ms. */
        static final long PREWARM_MS = 6000;

        /** Store URI template (see {@link StoreFixture}). */
        @Param({"memory:?capacity=2GiB"})
        public String store;
        /** Model preset. */
        @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
        public String model;
        /** Prompt tokens per request. */
        @Param({"256", "1024", "4096"})
        public int tokens;

        StoreFixture fixture;
        KVStore kv;
        TransferWorkload workload;
        int request;

        /** Starts the store and checks that one request survives a round trip intact. */
        @Setup(Level.Trial)
        public void setUp() {
            fixture = StoreFixture.start(store);
            kv = KVStores.open(fixture.uri());
            workload = new TransferWorkload(kv, KVLayout.preset(model), tokens, false);
            workload.insert(request);
            requireComplete(workload.dropSelect(request++));
            if (!workload.targetMatchesSource()) {
                throw new IllegalStateException(fixture.uri() + " returned other bytes than were inserted");
            }
            // A request is large and few fit in a short JMH warmup; without these the first (cold) ones dominate.
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PREWARM_MS);
            for (int i = 1; i < PREWARM_REQUESTS && System.nanoTime() < deadline; i++) {
                workload.insert(request);
                requireComplete(workload.dropSelect(request++));
            }
        }

        void requireComplete(DropResult r) {
            if (!r.isComplete()) {
                throw new IllegalStateException("request " + request + " came back incomplete from " + fixture.uri()
                        + ": " + r);
            }
        }

        /** Closes the workload, the store and its fixture. */
        @TearDown(Level.Trial)
        public void tearDown() {
            try {
                workload.close();
                kv.close();
            } finally {
                fixture.close();
            }
        }
    }

    /** For {@link #insert}: consumes each inserted request afterwards, untimed. */
    public static class Inserting extends Workload {
        /** Drop-selects the request just inserted, so the store starts every invocation empty. */
        @TearDown(Level.Invocation)
        public void consume() {
            requireComplete(workload.dropSelect(request++));
        }
    }

    /** For {@link #dropSelect}: commits a request before each invocation, untimed. */
    public static class Dropping extends Workload {
        DropResult dropped;

        /** Inserts the request the next invocation drop-selects. */
        @Setup(Level.Invocation)
        public void commitNext() {
            workload.insert(request);
        }

        /** Checks that the timed drop-select got the whole request. */
        @TearDown(Level.Invocation)
        public void check() {
            requireComplete(dropped);
            request++;
        }
    }

    /** Inserts one request (every layer, then commit). */
    @Benchmark
    public void insert(Inserting w) {
        w.workload.insert(w.request);
    }

    /** Drop-selects the request that {@link Dropping#commitNext} inserted. */
    @Benchmark
    public DropResult dropSelect(Dropping w) {
        w.dropped = w.workload.dropSelect(w.request);
        return w.dropped;
    }
}
