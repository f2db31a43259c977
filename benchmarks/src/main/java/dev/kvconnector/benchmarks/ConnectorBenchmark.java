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
 * A request takes from about 100 us (qwen2.5-0.5b, 256 tokens) to tens of ms, long enough that JMH's per-invocation
 * fixtures do not distort the sample.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ConnectorBenchmark {
    /** Store URI template (see {@link StoreFixture}). */
    @Param({"memory:?capacity=2GiB"})
    public String store;
    /** Model preset. */
    @Param({"qwen2.5-0.5b", "llama3-8b", "deepseek-v3-mla"})
    public String model;
    /** Prompt tokens per request. */
    @Param({"256", "1024", "4096"})
    public int tokens;

    private StoreFixture fixture;
    private KVStore kv;
    private TransferWorkload workload;
    private int request;
    private boolean leftover;

    /** Starts the store and checks that one request survives a round trip intact. */
    @Setup(Level.Trial)
    public void setUp() {
        fixture = StoreFixture.start(store);
        kv = KVStores.open(fixture.uri());
        workload = new TransferWorkload(kv, KVLayout.preset(model), tokens, false);
        workload.insert(request);
        DropResult r = workload.dropSelect(request++);
        if (!r.isComplete() || !workload.targetMatchesSource()) {
            throw new IllegalStateException(fixture.uri() + " did not return the request intact: " + r);
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

    /** Commits the next request before each invocation of {@link #dropSelect}. */
    @State(Scope.Thread)
    public static class Committed {
        /** Inserts the next request when the benchmark is {@link #dropSelect}. */
        @Setup(Level.Invocation)
        public void insertNext(ConnectorBenchmark b) {
            b.workload.insert(b.request);
        }
    }

    /** Inserts one request (every layer, then commit). */
    @Benchmark
    public void insert() {
        workload.insert(request);
        leftover = true;
    }

    /** Drop-selects the request that {@link Committed} inserted. */
    @Benchmark
    public DropResult dropSelect(Committed committed) {
        leftover = false;
        return workload.dropSelect(request);
    }

    /** Consumes what {@link #insert} left in the store, so every invocation starts from an empty store. */
    @TearDown(Level.Invocation)
    public void consumeLeftover() {
        if (leftover) {
            leftover = false;
            workload.dropSelect(request);
        }
        request++;
    }
}
