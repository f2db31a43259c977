package dev.kvconnector.benchmarks;

import dev.kvconnector.codec.RawTensorFormat;
import dev.kvconnector.layout.AttentionKind;
import dev.kvconnector.layout.KVLayout;
import dev.kvconnector.paged.BlockTable;
import dev.kvconnector.paged.PagedKVCache;
import dev.kvconnector.store.ClaimResult;
import dev.kvconnector.store.GetResult;
import dev.kvconnector.store.KVStore;
import dev.kvconnector.store.KVStores;
import dev.kvconnector.store.PutOptions;
import dev.kvconnector.store.StoreClaim;
import dev.kvconnector.store.StoreView;
import dev.kvconnector.tensor.DType;
import dev.kvconnector.tensor.TensorSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import dev.kvconnector.memory.WordSum;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What the store primitives allow one layer to cost, before the connector uses them: one llama3-8b layer at 1024
 * tokens (K and V, 4 MiB, 64 blocks of 16 tokens from a shuffled block table) in kvconnector's raw format over
 * {@code memory:}, the same layer every time (hot), beside the hot floor (one 4 MiB copy).
 *
 * <ul>
 *   <li>{@link #claimGatherCommit}: claim the object in the store, gather K and V into its payload with the
 *       payload checksum fused, stamp the header with it, commit; then remove it (one copy per layer).</li>
 *   <li>{@link #viewScatter}: view the stored object, check its header, scatter K and V out of it with the
 *       checksum fused, compare it, release (one copy per layer).</li>
 *   <li>{@link #stagedGatherPut} and {@link #stagedGetScatter}: the staged path for comparison: gather into
 *       staging, a checksum pass, a put that copies; a get that copies into staging, a checksum pass, the
 *       scatter.</li>
 * </ul>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ClaimPathBenchmark {
    static final KVLayout LAYER = new KVLayout("llama3-8b-one-layer", AttentionKind.MHA, 1, 8, 128, DType.BF16, 16,
            4096);
    static final int TOKENS = 1024;

    private KVStore store;
    private PagedKVCache source;
    private PagedKVCache target;
    private BlockTable sourceTable;
    private BlockTable targetTable;
    private TensorSpec spec;
    private long objectBytes;
    private long tensorBytes;
    private StoreClaim claim;
    private StoreView view;
    private final WordSum sum = new WordSum();
    private Arena arena;
    private MemorySegment staging;
    private MemorySegment floorSource;
    private MemorySegment floorTarget;

    /** Opens the store, fills the source cache, stores the object {@link #viewScatter} reads, and checks it. */
    @Setup(Level.Trial)
    public void setUp() {
        store = KVStores.open("memory:?capacity=256MiB");
        int blocks = TOKENS / LAYER.blockSize();
        source = PagedKVCache.allocate(LAYER, 2 * blocks);
        target = PagedKVCache.allocate(LAYER, 2 * blocks);
        SplittableRandom r = new SplittableRandom(16);
        for (int t = 0; t < 2; t++) {
            MemorySegment s = source.tensor(0, t);
            for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
                s.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
            }
        }
        sourceTable = new BlockTable(shuffled(2 * blocks, blocks, r), LAYER.blockSize(), TOKENS);
        targetTable = new BlockTable(shuffled(2 * blocks, blocks, r), LAYER.blockSize(), TOKENS);
        spec = TensorSpec.of(LAYER.dtype(), 2, TOKENS, LAYER.kvHeads(), LAYER.headSize());
        objectBytes = RawTensorFormat.encodedSize(spec);
        tensorBytes = TOKENS * LAYER.bytesPerTokenPerTensor();
        claim = store.newClaim();
        view = store.newView();
        arena = Arena.ofShared();
        staging = arena.allocate(objectBytes, 4096);
        floorSource = LayerShape.randomSegment(arena, 2 * tensorBytes);
        floorTarget = arena.allocate(2 * tensorBytes, LayerShape.ALIGNMENT);
        claimGatherCommitInto("kept");
        if (viewScatter() != RawTensorFormat.OK) {
            throw new IllegalStateException("the claimed object does not validate through a view");
        }
        for (int tok = 0; tok < TOKENS; tok++) {
            long tb = LAYER.bytesPerTokenPerTensor();
            long s = sourceTable.slot(tok) * tb;
            long d = targetTable.slot(tok) * tb;
            if (MemorySegment.mismatch(source.tensor(0, 1), s, s + tb, target.tensor(0, 1), d, d + tb) != -1) {
                throw new IllegalStateException("token " + tok + " of V came back changed");
            }
        }
    }

    private static int[] shuffled(int cacheBlocks, int used, SplittableRandom r) {
        int[] all = new int[cacheBlocks];
        for (int i = 0; i < all.length; i++) {
            all[i] = i;
        }
        for (int i = all.length - 1; i > 0; i--) {
            int j = r.nextInt(i + 1);
            int t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        return java.util.Arrays.copyOf(all, used);
    }

    /** Frees everything. */
    @TearDown(Level.Trial)
    public void tearDown() {
        store.close();
        source.close();
        target.close();
        arena.close();
    }

    private boolean claimGatherCommitInto(String key) {
        if (store.tryClaim(key, objectBytes, PutOptions.DEFAULT, claim) != ClaimResult.CLAIMED) {
            throw new IllegalStateException("no room for a claim of " + objectBytes + " bytes");
        }
        MemorySegment obj = claim.segment();
        sum.reset();
        source.gather(0, 0, sourceTable, 0, TOKENS, obj, RawTensorFormat.HEADER_BYTES, sum);
        source.gather(0, 1, sourceTable, 0, TOKENS, obj, RawTensorFormat.HEADER_BYTES + tensorBytes, sum);
        RawTensorFormat.writeHeaderWithSum(obj, spec, TOKENS, LAYER.fingerprint(), sum.value());
        return claim.commit();
    }

    /** Claim, gather with the fused checksum, stamp, commit, then remove. */
    @Benchmark
    public boolean claimGatherCommit() {
        boolean committed = claimGatherCommitInto("claimed");
        store.remove("claimed");
        return committed;
    }

    /** View, check the header, scatter with the fused checksum, compare, release. */
    @Benchmark
    public int viewScatter() {
        if (!GetResult.isHit(store.tryView("kept", view))) {
            throw new IllegalStateException("the kept object is gone");
        }
        try {
            MemorySegment obj = view.segment();
            int status = RawTensorFormat.validateHeader(obj, obj.byteSize(), spec, LAYER.fingerprint());
            if (status != RawTensorFormat.OK) {
                return status;
            }
            sum.reset();
            target.scatter(obj, RawTensorFormat.HEADER_BYTES, 0, 0, targetTable, 0, TOKENS, sum);
            target.scatter(obj, RawTensorFormat.HEADER_BYTES + tensorBytes, 0, 1, targetTable, 0, TOKENS, sum);
            return RawTensorFormat.verifyPayloadSum(obj, sum.value());
        } finally {
            view.release();
        }
    }

    /** The staged insert of one layer: gather into staging, a checksum pass, a put that copies, then remove. */
    @Benchmark
    public boolean stagedGatherPut() {
        source.gather(0, 0, sourceTable, 0, TOKENS, staging, RawTensorFormat.HEADER_BYTES);
        source.gather(0, 1, sourceTable, 0, TOKENS, staging, RawTensorFormat.HEADER_BYTES + tensorBytes);
        RawTensorFormat.writeHeader(staging, spec, TOKENS, LAYER.fingerprint(), true);
        boolean stored = store.put("staged", staging, PutOptions.DEFAULT);
        store.remove("staged");
        return stored;
    }

    /** The staged drop of one layer: a get that copies into staging, a checksum pass, then the scatter. */
    @Benchmark
    public int stagedGetScatter() {
        long r = store.getInto("kept", staging);
        int status = RawTensorFormat.validate(staging, r, spec, LAYER.fingerprint());
        target.scatter(staging, RawTensorFormat.HEADER_BYTES, 0, 0, targetTable, 0, TOKENS);
        target.scatter(staging, RawTensorFormat.HEADER_BYTES + tensorBytes, 0, 1, targetTable, 0, TOKENS);
        return status;
    }

    /** The hot floor: one copy of the 4 MiB layer. */
    @Benchmark
    public MemorySegment hotFloor() {
        MemorySegment.copy(floorSource, 0, floorTarget, 0, floorSource.byteSize());
        return floorTarget;
    }
}
